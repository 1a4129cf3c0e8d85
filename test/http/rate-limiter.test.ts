import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import { describe, it } from 'node:test'

import {
  addressKey,
  createClientAddress,
  ipv6Groups,
  parseTrustedProxies,
  unmapped,
} from '../../src/http/client-address.js'
import { RateLimitTable, REFUSED } from '../../src/http/rate-limit-table.js'
import {
  createRateLimiter,
  partitionDigest,
  rateLimitFields,
  secondsLeft,
} from '../../src/http/rate-limiter.js'

const SUBJECT = 0
const ADDRESS = 1

/** take() and the end of its window, as one value to compare. */
function take(table: RateLimitTable, index: number, digest: number, now: number) {
  const left = table.take(index, digest, now)
  return {
    allowed: left !== REFUSED,
    remaining: left === REFUSED ? 0 : left,
    endsAt: table.endsAtOfLast,
  }
}

describe('RateLimitTable: the fixed window', () => {
  it('opens at the first request, takes one unit each, refuses once spent without taking, and reopens at its end', () => {
    const table = new RateLimitTable(10, [{ quota: 2, windowMs: 1000 }])
    assert.deepEqual(take(table, SUBJECT, 7, 5000), { allowed: true, remaining: 1, endsAt: 6000 })
    assert.deepEqual(take(table, SUBJECT, 7, 5400), { allowed: true, remaining: 0, endsAt: 6000 })
    for (const at of [5500, 5999]) {
      assert.deepEqual(take(table, SUBJECT, 7, at), { allowed: false, remaining: 0, endsAt: 6000 })
    }
    assert.deepEqual(take(table, SUBJECT, 7, 6000), { allowed: true, remaining: 1, endsAt: 7000 })
    assert.equal(table.size, 1)
  })

  it('throws RangeError for a policy it was not given', () => {
    const table = new RateLimitTable(10, [{ quota: 2, windowMs: 1000 }])
    assert.throws(() => table.take(1, 7, 0), { name: 'RangeError', message: 'no policy 1' })
  })

  it('keeps each partition apart, and each policy apart', () => {
    const table = new RateLimitTable(10, [
      { quota: 1, windowMs: 1000 },
      { quota: 3, windowMs: 5000 },
    ])
    assert.equal(take(table, SUBJECT, 1, 0).allowed, true)
    assert.equal(take(table, SUBJECT, 1, 0).allowed, false)
    assert.equal(take(table, SUBJECT, 2, 0).allowed, true)
    assert.deepEqual(take(table, ADDRESS, 1, 0), { allowed: true, remaining: 2, endsAt: 5000 })
  })
})

describe('RateLimitTable: bounded', () => {
  it('drops partitions whose window ended, and when full evicts the one whose window ends first', () => {
    const table = new RateLimitTable(3, [
      { quota: 1, windowMs: 10_000 },
      { quota: 1, windowMs: 1000 },
    ])
    take(table, SUBJECT, 1, 0) // ends at 10,000
    take(table, ADDRESS, 2, 100) // ends at 1,100: the first to end
    take(table, SUBJECT, 3, 200) // ends at 10,200
    assert.equal(table.size, 3)
    take(table, SUBJECT, 4, 500) // full: evicts the address partition 2
    assert.equal(table.size, 3)
    assert.equal(take(table, SUBJECT, 1, 600).allowed, false, 'subject 1 kept')
    assert.equal(take(table, SUBJECT, 3, 600).allowed, false, 'subject 3 kept')
    assert.equal(take(table, SUBJECT, 4, 600).allowed, false, 'subject 4 kept')
    // The evicted partition starts afresh when it comes back, evicting subject 1 (ends at 10,000).
    assert.deepEqual(take(table, ADDRESS, 2, 700), { allowed: true, remaining: 0, endsAt: 1700 })
    assert.equal(take(table, SUBJECT, 1, 800).allowed, true, 'subject 1 was evicted')
    // Every window but one ended: a new partition finds room without evicting a live one.
    take(table, SUBJECT, 9, 10_600)
    assert.equal(table.size, 2)
  })

  it('drops another partition at the very ms its window ends', () => {
    const table = new RateLimitTable(10, [{ quota: 1, windowMs: 1000 }])
    take(table, SUBJECT, 1, 0) // ends at 1,000
    take(table, SUBJECT, 2, 1000)
    assert.equal(table.size, 1)
  })

  it('evicts the front of whichever policy ends first, the first policy included', () => {
    const table = new RateLimitTable(2, [
      { quota: 1, windowMs: 1000 },
      { quota: 1, windowMs: 10_000 },
    ])
    take(table, SUBJECT, 1, 0) // ends at 1,000: the first to end
    take(table, ADDRESS, 2, 100) // ends at 10,100
    take(table, SUBJECT, 3, 200) // full: evicts subject 1
    assert.equal(take(table, ADDRESS, 2, 300).allowed, false, 'address 2 kept')
    assert.equal(take(table, SUBJECT, 3, 300).allowed, false, 'subject 3 kept')
    assert.equal(take(table, SUBJECT, 1, 400).allowed, true, 'subject 1 was evicted')
  })

  it('never holds more than its capacity, whatever the number of partitions', () => {
    const table = new RateLimitTable(1000, [{ quota: 5, windowMs: 60_000 }])
    for (let i = 0; i < 50_000; i += 1) table.take(SUBJECT, i, i)
    assert.equal(table.size, 1000)
    // The newest are held; the oldest were evicted.
    assert.equal(take(table, SUBJECT, 49_999, 50_000).remaining, 3)
    assert.equal(take(table, SUBJECT, 0, 50_000).remaining, 4)
  })
})

describe('the partition key', () => {
  it('is a 53-bit digest of the key, seeded, whatever its length', () => {
    const long = 'x'.repeat(100_000)
    for (const key of ['', 'a', 'subject-1', long]) {
      const digest = partitionDigest(key, 42)
      assert.ok(Number.isSafeInteger(digest) && digest >= 0, key.slice(0, 10))
      assert.equal(partitionDigest(key, 42), digest, 'the same key, the same digest')
    }
    assert.notEqual(partitionDigest('subject-1', 42), partitionDigest('subject-2', 42))
    assert.notEqual(partitionDigest('subject-1', 42), partitionDigest('subject-1', 43))
    const seen = new Set<number>()
    for (let i = 0; i < 100_000; i += 1) seen.add(partitionDigest(`user-${i}`, 7))
    assert.equal(seen.size, 100_000)
  })

  it("is cyrb53: seed 0 gives the reference implementation's digests", () => {
    assert.equal(partitionDigest('a', 0), 7929297801672961)
    assert.equal(partitionDigest('b', 0), 8684336938537663)
    assert.equal(partitionDigest('revenge', 0), 4051478007546757)
    assert.equal(partitionDigest('revenue', 0), 8309097637345594)
  })

  it('uses every bit of the 47-bit seed, those above 32 included', () => {
    assert.notEqual(partitionDigest('a', 2 ** 32), partitionDigest('a', 0))
    assert.notEqual(partitionDigest('a', 2 ** 46), partitionDigest('a', 0))
  })

  it('reads an IPv6 address by its /64 and an IPv4-mapped one as IPv4', () => {
    assert.equal(addressKey('2001:db8:a:b:c:d:e:f'), '2001:db8:a:b::/64')
    assert.equal(addressKey('2001:db8:a:b::1'), '2001:db8:a:b::/64')
    assert.equal(addressKey('2001:DB8:A:B::1'), '2001:db8:a:b::/64')
    assert.equal(addressKey('2001:db8::'), '2001:db8:0:0::/64')
    assert.equal(addressKey('::1'), '0:0:0:0::/64')
    assert.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64')
    assert.equal(addressKey('192.0.2.1'), '192.0.2.1')
    assert.equal(unmapped('::ffff:192.0.2.1'), '192.0.2.1')
    assert.equal(unmapped('::FFFF:192.0.2.1'), '192.0.2.1')
    // Every spelling of an IPv4-mapped address is that IPv4 address; other IPv6 ones stay.
    assert.equal(unmapped('::ffff:c000:201'), '192.0.2.1')
    assert.equal(unmapped('0:0:0:0:0:ffff:192.0.2.1'), '192.0.2.1')
    assert.equal(unmapped('0:0:0:0:0:FFFF:C633:6407'), '198.51.100.7')
    assert.equal(unmapped('::ffff:0:c000:201'), '::ffff:0:c000:201')
    assert.equal(unmapped('::c000:201'), '::c000:201')
    assert.equal(unmapped('1::ffff:c000:201'), '1::ffff:c000:201')
    assert.deepEqual(ipv6Groups('64:ff9b::192.0.2.1'), [0x64, 0xff9b, 0, 0, 0, 0, 0xc000, 0x201])
    assert.equal(ipv6Groups('not an address'), undefined)
  })

  it('unmaps only ::ffff: itself, and reads a dotted tail without its zone', () => {
    assert.equal(unmapped('::fffe:192.0.2.1'), '::fffe:192.0.2.1')
    assert.equal(unmapped('::ffff:192.0.2.1%eth0'), '192.0.2.1')
    assert.deepEqual(ipv6Groups('fe80::192.0.2.1%eth0'), [0xfe80, 0, 0, 0, 0, 0, 0xc000, 0x201])
  })
})

/** A request from `peer`, with the X-Forwarded-For given (undefined: none). */
function requestFrom(peer: string, forwarded?: string | string[]): IncomingMessage {
  const headers = forwarded === undefined ? {} : { 'x-forwarded-for': forwarded }
  return { socket: { remoteAddress: peer }, headers } as unknown as IncomingMessage
}

describe('TRUSTED_PROXIES', () => {
  it('passes over empty entries and the spaces around each', () => {
    assert.deepEqual(parseTrustedProxies(' 10.0.0.0/8,, fd00::/8 ,'), ['10.0.0.0/8', 'fd00::/8'])
    assert.deepEqual(parseTrustedProxies(''), [])
  })

  it('takes IPv6 prefixes up to 128 and the IPv4-mapped form of every IPv4 block', () => {
    for (const entry of ['2001:db8::/64', '2001:db8::1/128', '2001:db8::1', '::ffff:0.0.0.0/96']) {
      assert.deepEqual(parseTrustedProxies(entry), [entry])
    }
  })

  it('throws TrustedProxyError naming an entry that is not an address or a block', () => {
    for (const entry of [
      'proxy.example',
      '10.0.0.0/33',
      '10.0.0.0/x8',
      '10.0.0.0/8x',
      '10.0.0.0/+8',
      '10.0.0.0/8.0',
      '::ffff:10.0.0.0/95',
      'fd00::/129',
    ]) {
      assert.throws(
        () => parseTrustedProxies(`192.0.2.1,${entry}`),
        (error: unknown) =>
          error instanceof Error &&
          error.name === 'TrustedProxyError' &&
          error.message.startsWith(`"${entry}"`),
        entry,
      )
    }
  })
})

describe('createClientAddress', () => {
  it('without trusted proxies, is the peer, by its /64 for IPv6, and ignores X-Forwarded-For', () => {
    const clientAddress = createClientAddress([])
    assert.equal(clientAddress(requestFrom('198.51.100.7', '203.0.113.1')), '198.51.100.7')
    assert.equal(clientAddress(requestFrom('::ffff:198.51.100.7')), '198.51.100.7')
    assert.equal(clientAddress(requestFrom('2001:db8:1:2::3')), '2001:db8:1:2::/64')
  })

  it('trusts a lone IPv6 proxy address as that one address', () => {
    const clientAddress = createClientAddress(['2001:db8::1'])
    assert.equal(clientAddress(requestFrom('2001:db8::1', '198.51.100.7')), '198.51.100.7')
    assert.equal(clientAddress(requestFrom('2001:db8::2', '198.51.100.7')), '2001:db8:0:0::/64')
  })

  it('counts requests whose socket is already gone (no peer address) together, as ""', () => {
    const gone = { socket: {}, headers: {} } as unknown as IncomingMessage
    assert.equal(createClientAddress([])(gone), '')
    assert.equal(createClientAddress(['10.0.0.0/8'])(gone), '')
  })

  it('reads X-Forwarded-For given as separate field lines as one list', () => {
    const clientAddress = createClientAddress(['10.0.0.0/8'])
    const req = requestFrom('10.0.0.1', ['198.51.100.7', '198.51.100.8, 10.1.2.3'])
    assert.equal(clientAddress(req), '198.51.100.8')
  })
})

describe('the fields', () => {
  const policy = {
    name: 'subject',
    quota: 600,
    policyField: '"subject";q=600;w=60',
    limitField: '600',
  } as const

  it('formats RateLimit-Policy, RateLimit and the X-RateLimit-* fields', () => {
    assert.deepEqual(rateLimitFields(policy, 17, 42, 1_700_000_041_500), [
      'ratelimit-policy',
      '"subject";q=600;w=60',
      'ratelimit',
      '"subject";r=17;t=42',
      'x-ratelimit-limit',
      '600',
      'x-ratelimit-remaining',
      '17',
      'x-ratelimit-used',
      '583',
      'x-ratelimit-reset',
      '1700000042',
    ])
  })

  it('rounds the seconds left up, and never below 1', () => {
    assert.equal(secondsLeft(60_000, 0), 60)
    assert.equal(secondsLeft(60_000, 1), 60)
    assert.equal(secondsLeft(60_000, 59_001), 1)
    assert.equal(secondsLeft(60_000, 59_999), 1)
    assert.equal(secondsLeft(60_000, 60_000), 1)
  })

  it('holds one partition per subject counted', () => {
    const limiter = createRateLimiter({
      subject: { quota: 5, windowSeconds: 60 },
      address: undefined,
      maxClients: 10,
      trustedProxies: [],
      now: Date.now,
    })
    const req = requestFrom('192.0.2.1')
    limiter?.count(req, 'subject-1')
    limiter?.count(req, 'subject-2')
    limiter?.count(req, 'subject-1')
    assert.equal(limiter?.size, 2)
  })

  it('is nothing at all with both policies off', () => {
    const off = createRateLimiter({
      subject: undefined,
      address: undefined,
      maxClients: 10,
      trustedProxies: [],
      now: Date.now,
    })
    assert.equal(off, undefined)
  })
})
