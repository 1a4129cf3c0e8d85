import { request } from './http.js'
import { makeToken } from './tokens.js'

/** The data directory test/fixtures/layout-1 holds, written by a release of layout 1. */
export const LAYOUT_1 = {
  revokedUser: '01a22d84-c72d-70b9-bbb0-4ab36acf7c19',
  deletedUser: '01a22d84-c787-7075-ae7b-67a28e3287c3',
  webhook: '01a22d84-c628-701b-9fd8-948524ee1510',
} as const

const TOKEN = makeToken({
  sub: 'fixture-admin',
  scope: 'users:read users:write users:admin events:read webhooks:admin',
})

/** Everything the API shows of a data directory: what an upgrade must keep, byte for byte. */
export async function observeData(url: string): Promise<Record<string, unknown>> {
  const get = async (path: string): Promise<unknown> => {
    const answer = await request('GET', `${url}${path}`, { token: TOKEN })
    if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${answer.text}`)
    return answer.json()
  }
  const exported = await fetch(`${url}/users:export`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  })
  const { webhook } = LAYOUT_1
  return {
    export: (await exported.text()).split('\n').filter((line) => line !== ''),
    events: await get('/events?after=0000000000000000&limit=100'),
    webhooks: await get('/webhooks'),
    deliveries: await get(`/webhooks/${webhook}/deliveries`),
    cursor: await get(`/webhooks/${webhook}/cursor`),
  }
}
