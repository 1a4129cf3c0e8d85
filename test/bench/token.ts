// HS256 JWT for the benchmark, signed with node:crypto (no dependencies).
import { createHmac } from 'node:crypto'

const b64url = (data: string | Buffer): string => Buffer.from(data).toString('base64url')

/** The scopes of the bench's tokens: every /users and /events right (not webhooks:admin). */
const USER_SCOPES = 'users:read users:write users:admin events:read'

/** `sub` is not a user id by default: no subject check (docs/api.md) is made for it. */
export const makeToken = (
  secret: string,
  ttlS = 3600,
  scope = USER_SCOPES,
  sub = 'bench',
): string => {
  const iat = Math.floor(Date.now() / 1000)
  const header = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))
  const claims = b64url(
    JSON.stringify({
      sub,
      scope,
      iat,
      exp: iat + ttlS,
    }),
  )
  const signature = createHmac('sha256', secret).update(`${header}.${claims}`).digest('base64url')
  return `${header}.${claims}.${signature}`
}
