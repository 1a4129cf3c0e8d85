// The wrk Lua scripts of the bench's cases (one wrk thread; requests are prebuilt in init where
// possible). `auth` is the Authorization header every request carries.
import { randomBytes } from 'node:crypto'

import { luaHeaders, luaString } from './wrk.js'

export const staticGet = (auth: string, path: string): string => `
wrk.method = "GET"
wrk.path = ${luaString(path)}
wrk.headers["Authorization"] = ${luaString(auth)}
`

/**
 * A Lua script that builds one request per entry of `items` (a Lua table literal body) once, in
 * init, with `format` (a Lua expression over `it`, the entry), then sends them round-robin.
 */
const roundRobinScript = (items: string, format: string): string => `
local items = {
${items}
}
local reqs = {}
local n = #items
local i = 0
init = function(args)
  for k = 1, n do
    local it = items[k]
    reqs[k] = ${format}
  end
end
request = function()
  i = i % n + 1
  return reqs[i]
end
`

export const getById = (auth: string, ids: string[]): string =>
  roundRobinScript(
    ids.map((id) => `  ${luaString(id)},`).join('\n'),
    `wrk.format("GET", "/users/" .. it, { ["Authorization"] = ${luaString(auth)} })`,
  )

/** POST /users of new users; `keyed`: each with an Idempotency-Key of its own. */
export const post = (auth: string, keyed = false): string => {
  const prefix = randomBytes(4).toString('hex')
  return `
local prefix = ${luaString(prefix)}
local counter = 0
request = function()
  counter = counter + 1
  local body = '{"email":"b' .. prefix .. '-' .. counter .. '@bench.example.com","name":"Bench"}'
  local headers = { ["Authorization"] = ${luaString(auth)}, ["Content-Type"] = "application/json" }
  ${keyed ? `headers["Idempotency-Key"] = '"' .. prefix .. '-' .. counter .. '"'` : ''}
  return wrk.format("POST", "/users", headers, body)
end
`
}

export interface PatchTarget {
  id: string
  etag: string
  name: string
}

export const patch = (auth: string, targets: PatchTarget[]): string =>
  roundRobinScript(
    targets
      .map((t) => `  { ${luaString(t.id)}, ${luaString(t.etag)}, ${luaString(nameBody(t.name))} },`)
      .join('\n'),
    `wrk.format("PATCH", "/users/" .. it[1], { ["Authorization"] = ${luaString(auth)}, ` +
      `["Content-Type"] = "application/merge-patch+json", ["If-Match"] = it[2] }, it[3])`,
  )

/**
 * PATCH that really changes each user: the name flips between its seeded value and a variant,
 * so every request bumps the version and writes the file. The new ETag is taken from each
 * response (users are visited round-robin, so a user's response is back long before its next
 * request). ETags only live for one wrk process: the script is rebuilt from fresh ETags per run.
 */
export const changingPatch = (auth: string, targets: PatchTarget[]): string => `
local targets = {
${targets.map((t) => `  { ${luaString(t.id)}, ${luaString(t.etag)}, ${luaString(nameBody(t.name))}, ${luaString(nameBody(flipName(t.name)))} },`).join('\n')}
}
local etags = {}
for k = 1, #targets do etags[targets[k][1]] = targets[k][2] end
local n = #targets
local i = 0
request = function()
  i = i % n + 1
  local t = targets[i]
  t[3], t[4] = t[4], t[3]
  local headers = ${luaHeaders({ Authorization: auth, 'Content-Type': 'application/merge-patch+json' })}
  headers["If-Match"] = etags[t[1]]
  return wrk.format("PATCH", "/users/" .. t[1], headers, t[3])
end
response = function(status, headers, body)
  local etag = headers["etag"] or headers["ETag"]
  local id = string.match(body, '"id":"([^"]+)"')
  if etag ~= nil and id ~= nil and etags[id] ~= nil then etags[id] = etag end
end
`

export const nameBody = (name: string): string => JSON.stringify({ name })

const FLIP_SUFFIX = ' (patched)'
export const flipName = (name: string): string =>
  name.endsWith(FLIP_SUFFIX) ? name.slice(0, -FLIP_SUFFIX.length) : `${name}${FLIP_SUFFIX}`
