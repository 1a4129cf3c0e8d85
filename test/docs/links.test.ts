import assert from 'node:assert/strict'
import { existsSync, readdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'

import { anchorsOf, linksOf, readRepoFile, slugOf } from '../helpers/markdown.js'
import { PROJECT_ROOT } from '../helpers/project-root.js'

/** The documents a reader follows links through: the README, the changelog and docs/. */
function documents(): string[] {
  const docs = readdirSync(path.join(PROJECT_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
  return ['README.md', 'CHANGELOG.md', ...docs.map((name) => `docs/${name}`)]
}

/** Why `target`, linked from `from`, leads nowhere; undefined when it leads somewhere. */
function brokenBecause(from: string, target: string): string | undefined {
  const hash = target.indexOf('#')
  const file = hash === -1 ? target : target.slice(0, hash)
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1))
  const resolved =
    file === ''
      ? path.join(PROJECT_ROOT, from)
      : path.resolve(PROJECT_ROOT, path.dirname(from), decodeURIComponent(file))
  // A clone holds only the repository: a link that climbs out of it leads nowhere for a reader.
  const inside = path.relative(PROJECT_ROOT, resolved)
  if (inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside))
    return `leaves the repository: ${target}`
  if (!existsSync(resolved)) return `no such file: ${path.relative(PROJECT_ROOT, resolved)}`
  if (anchor === undefined) return undefined
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md'))
    return `an anchor into a file that has no headings`
  const relative = path.relative(PROJECT_ROOT, resolved)
  return anchorsOf(readRepoFile(relative)).has(anchor)
    ? undefined
    : `no heading makes #${anchor} in ${relative}`
}

describe('links in the README, the changelog and docs/', () => {
  it('makes anchors as GitHub does', () => {
    assert.equal(slugOf('The change feed (`/events`)'), 'the-change-feed-events')
    assert.equal(
      slugOf('In your own tests: `user-service/testing`'),
      'in-your-own-tests-user-servicetesting',
    )
    assert.equal(
      slugOf('Many users at once: batch get, export, import'),
      'many-users-at-once-batch-get-export-import',
    )
    assert.deepEqual(
      [...anchorsOf('# A\n```sh\n# not a heading\n```\n## A\n## B_c\n')],
      ['a', 'a-1', 'b_c'],
    )
  })

  it('finds a broken link, and a link to a heading that does not exist', () => {
    assert.match(
      brokenBecause('README.md', 'docs/nothing-here.md') ?? '',
      /no such file: docs\/nothing-here\.md/,
    )
    assert.match(
      brokenBecause('README.md', 'docs/bulk.md#no-such-heading') ?? '',
      /no heading makes #no-such-heading/,
    )
    assert.equal(brokenBecause('docs/events.md', 'performance.md#with-postgresql'), undefined)
  })

  it('finds a link that leaves the repository, even to a file that exists beside it', () => {
    assert.match(brokenBecause('README.md', '../elsewhere/NOTES.md') ?? '', /leaves the repository/)
    assert.match(brokenBecause('docs/api.md', '../../x') ?? '', /leaves the repository/)
    assert.match(brokenBecause('docs/api.md', '/etc/hosts') ?? '', /leaves the repository/)
    assert.equal(brokenBecause('docs/api.md', '../README.md#the-api'), undefined)
  })

  it('has docs/ with a page for each subject the README sends readers to', () => {
    assert.deepEqual(
      documents().filter((name) => name.startsWith('docs/')),
      [
        'docs/admin-page.md',
        'docs/api.md',
        'docs/architecture.md',
        'docs/bulk.md',
        'docs/configuration.md',
        'docs/development.md',
        'docs/embedding.md',
        'docs/events.md',
        'docs/operations.md',
        'docs/performance.md',
        'docs/postgresql.md',
        'docs/webhooks.md',
      ],
    )
  })

  for (const document of documents()) {
    it(`${document}: every relative link leads to a file and heading that exist`, () => {
      const links = linksOf(readRepoFile(document)).filter(
        ({ target }) => !/^[a-z][a-z0-9+.-]*:/i.test(target),
      )
      const broken = links.flatMap(({ line, target }) => {
        const why = brokenBecause(document, target)
        return why === undefined ? [] : [`${document}:${line} (${target}): ${why}`]
      })
      assert.deepEqual(broken, [])
    })
  }

  it('the README links to every page of docs/', () => {
    const linked = new Set(
      linksOf(readRepoFile('README.md')).map(({ target }) => target.split('#')[0]),
    )
    const missing = documents().filter((name) => name.startsWith('docs/') && !linked.has(name))
    assert.deepEqual(missing, [])
  })
})
