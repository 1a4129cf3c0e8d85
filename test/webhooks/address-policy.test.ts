import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { ConfigError } from '../../src/settings.js'
import {
  ALLOW_NONE,
  createAllowList,
  isRefusedAddress,
  refusedUrlHost,
} from '../../src/webhooks/address-policy.js'

/** One address at each edge of every refused range, and the first address past it. */
const REFUSED: readonly (readonly [range: string, inside: readonly string[]])[] = [
  ['loopback 127.0.0.0/8', ['127.0.0.1', '127.255.255.255']],
  ['loopback ::1', ['::1', '0:0:0:0:0:0:0:1']],
  ['unspecified 0.0.0.0/8', ['0.0.0.0', '0.255.255.255']],
  ['unspecified ::', ['::']],
  ['private 10/8', ['10.0.0.0', '10.255.255.255']],
  ['private 172.16/12', ['172.16.0.0', '172.31.255.255']],
  ['private 192.168/16', ['192.168.0.0', '192.168.255.255']],
  ['unique local fc00::/7', ['fc00::1', 'fdff:ffff::1']],
  ['link-local 169.254/16 (the cloud metadata address)', ['169.254.169.254', '169.254.0.0']],
  ['link-local fe80::/10', ['fe80::1', 'febf::1', 'fe80::1%eth0']],
  ['shared 100.64/10', ['100.64.0.0', '100.127.255.255']],
  ['benchmarking 198.18/15', ['198.18.0.0', '198.19.255.255']],
  ['documentation 192.0.2/24', ['192.0.2.1']],
  ['documentation 198.51.100/24', ['198.51.100.1']],
  ['documentation 203.0.113/24', ['203.0.113.1']],
  ['documentation 2001:db8::/32', ['2001:db8::1', '2001:db8:ffff::1']],
  ['IETF protocol assignments 192.0.0/24', ['192.0.0.8']],
  ['multicast 224/4', ['224.0.0.1', '239.255.255.255']],
  ['multicast ff00::/8', ['ff02::1', 'ff0e::1']],
  ['reserved 240/4 and broadcast', ['240.0.0.1', '255.255.255.255']],
  [
    '6to4 2002::/16, NAT64 64:ff9b::/96 and Teredo 2001::/32',
    ['2002:a00::1', '64:ff9b::a00:1', '2001::1'],
  ],
  [
    'IPv4-mapped forms of refused IPv4 addresses',
    ['::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:10.0.0.1', '0:0:0:0:0:ffff:a9fe:a9fe'],
  ],
]

const ALLOWED: readonly string[] = [
  '8.8.8.8',
  '1.1.1.1',
  '9.255.255.255', // just below 10/8
  '11.0.0.0', // just above
  '100.63.255.255',
  '100.128.0.0',
  '126.255.255.255',
  '128.0.0.0',
  '172.15.255.255',
  '172.32.0.0',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '223.255.255.255',
  '2606:4700:4700::1111',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
]

describe('isRefusedAddress without WEBHOOK_ALLOW_NETWORKS', () => {
  for (const [range, inside] of REFUSED) {
    it(`refuses ${range}`, () => {
      for (const address of inside)
        assert.equal(isRefusedAddress(address, ALLOW_NONE), true, address)
    })
  }

  it('lets global unicast addresses through, those next to each refused range included', () => {
    for (const address of ALLOWED)
      assert.equal(isRefusedAddress(address, ALLOW_NONE), false, address)
  })

  it('reads only ::ffff:a.b.c.d as IPv4: other IPv6 addresses ending in an IPv4 one stay IPv6', () => {
    for (const address of [
      '::808:808', // IPv4-compatible (deprecated), not mapped
      '::ff:808:808',
      '::ff00:808:808',
      '::1:ffff:808:808',
      'fe80::ffff:808:808',
      '2001:db8::ffff:808:808',
    ])
      assert.equal(isRefusedAddress(address, ALLOW_NONE), true, address)
  })

  it('refuses what is not an IP address', () => {
    for (const text of ['', 'example.com', '1.2.3', '256.1.1.1', '[::1]', '1.2.3.4/32'])
      assert.equal(isRefusedAddress(text, ALLOW_NONE), true, text)
  })
})

describe('isRefusedAddress with WEBHOOK_ALLOW_NETWORKS', () => {
  it('allows a refused address inside an allowed IPv4 block, and only inside it', () => {
    const allow = createAllowList(['127.0.0.0/8', '10.20.0.0/16'])
    assert.equal(isRefusedAddress('127.0.0.1', allow), false)
    assert.equal(isRefusedAddress('10.20.3.4', allow), false)
    assert.equal(isRefusedAddress('10.21.0.1', allow), true)
    assert.equal(isRefusedAddress('::1', allow), true)
    assert.equal(isRefusedAddress('169.254.169.254', allow), true)
  })

  it('checks an IPv4-mapped address against the IPv4 blocks', () => {
    const allow = createAllowList(['127.0.0.0/8'])
    assert.equal(isRefusedAddress('::ffff:127.0.0.1', allow), false)
    assert.equal(isRefusedAddress('::ffff:7f00:2', allow), false)
  })

  it('reads an allowed block written in IPv4-mapped form as its IPv4 block', () => {
    const allow = createAllowList(['::ffff:127.0.0.0/104', '::ffff:10.1.2.3'])
    assert.equal(isRefusedAddress('127.0.0.1', allow), false)
    assert.equal(isRefusedAddress('::ffff:127.0.0.1', allow), false)
    assert.equal(isRefusedAddress('10.1.2.3', allow), false)
    assert.equal(isRefusedAddress('10.1.2.4', allow), true)
    assert.equal(isRefusedAddress('::1', allow), true)
    assert.throws(() => createAllowList(['::ffff:127.0.0.0/95']))
  })

  it("allows only addresses of a block's own family, even with a prefix of 0", () => {
    const v6 = createAllowList(['::/0'])
    assert.equal(isRefusedAddress('fd00::1', v6), false)
    assert.equal(isRefusedAddress('10.0.0.1', v6), true)
    assert.equal(isRefusedAddress('::ffff:10.0.0.1', v6), true)
    const v4 = createAllowList(['0.0.0.0/0'])
    assert.equal(isRefusedAddress('10.0.0.1', v4), false)
    assert.equal(isRefusedAddress('::1', v4), true)
    assert.equal(isRefusedAddress('fe80::1', v4), true)
    const mapped = createAllowList(['::ffff:0.0.0.0/96'])
    assert.equal(isRefusedAddress('10.0.0.1', mapped), false)
    assert.equal(isRefusedAddress('::1', mapped), true)
  })

  it('checks an address with a zone index without its zone', () => {
    const allow = createAllowList(['10.0.0.1', 'fe80::1.2.3.4'])
    assert.equal(isRefusedAddress('::ffff:10.0.0.1%eth0', allow), false)
    assert.equal(isRefusedAddress('::ffff:10.0.0.7%eth0', allow), true)
    assert.equal(isRefusedAddress('fe80::1.2.3.4%eth0', allow), false)
    assert.equal(isRefusedAddress('fe80::1.2.3.5%eth0', allow), true)
  })

  it('allows IPv6 blocks and lone addresses', () => {
    const allow = createAllowList(['fd00:1::/32', '::1', '192.168.1.7'])
    assert.equal(isRefusedAddress('fd00:1:2::3', allow), false)
    assert.equal(isRefusedAddress('fd00:2::3', allow), true)
    assert.equal(isRefusedAddress('::1', allow), false)
    assert.equal(isRefusedAddress('192.168.1.7', allow), false)
    assert.equal(isRefusedAddress('192.168.1.8', allow), true)
  })

  it('reads a block whose host bits are set as the block', () => {
    const allow = createAllowList(['10.20.30.40/16'])
    assert.equal(isRefusedAddress('10.20.0.1', allow), false)
  })

  it('throws ConfigError naming an entry that is not a CIDR block', () => {
    for (const entry of [
      '10.0.0.0/33',
      '::/129',
      'example.com',
      '10.0.0.0/',
      '10.0.0.0/-1',
      '1.2.3/8',
      // Lengths that Number() reads but that are not decimal digits alone.
      '10.0.0.0/x8',
      '10.0.0.0/8x',
      '10.0.0.0/+8',
      '10.0.0.0/ 8',
      '10.0.0.0/8.0',
      '10.0.0.0/0x8',
    ]) {
      assert.throws(
        () => createAllowList([entry]),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message.startsWith('WEBHOOK_ALLOW_NETWORKS') &&
          error.message.includes(entry),
        entry,
      )
    }
  })
})

describe('refusedUrlHost', () => {
  const refused = (text: string, allow = ALLOW_NONE): boolean =>
    refusedUrlHost(new URL(text), allow)

  it('refuses a loopback literal in every spelling the URL parser accepts', () => {
    for (const url of [
      'http://127.0.0.1/',
      'http://127.1/',
      'http://2130706433/',
      'http://0x7f.0.0.1/',
      'http://0x7f000001/',
      'http://017700000001/',
      'http://0177.0.0.1:8080/hook',
      'http://127.0.0.1./',
      'http://[::1]/',
      'http://[0:0:0:0:0:0:0:1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:7f00:1]/',
      'https://0/',
    ])
      assert.equal(refused(url), true, url)
  })

  it('refuses private, link-local and metadata literals', () => {
    for (const url of [
      'http://10.1.2.3/',
      'http://169.254.169.254/latest',
      'http://[fe80::1]/',
      'http://[fd00::1]/',
      'http://0xa9fea9fe/',
    ])
      assert.equal(refused(url), true, url)
  })

  it('accepts a global literal and any other name (names are checked when resolved)', () => {
    for (const url of [
      'https://8.8.8.8/',
      'https://[2606:4700:4700::1111]/',
      'https://crm.example.com/hooks?a=1',
      'http://localhost.example.com/',
      'http://mylocalhost/',
    ])
      assert.equal(refused(url), false, url)
  })

  it('refuses localhost and names under .localhost unless loopback is allowed', () => {
    for (const url of [
      'http://localhost/',
      'http://LOCALHOST:3000/',
      'http://localhost./',
      'http://api.localhost/',
      'http://a.b.localhost./',
      // Every trailing dot, not just one: the name is still localhost to a reader.
      'http://localhost../',
      'http://api.localhost.../',
    ]) {
      assert.equal(refused(url), true, url)
      assert.equal(refused(url, createAllowList(['127.0.0.0/8'])), false, url)
      assert.equal(refused(url, createAllowList(['::1/128'])), false, url)
      assert.equal(refused(url, createAllowList(['10.0.0.0/8'])), true, url)
    }
  })

  it('accepts an allowed literal', () => {
    const allow = createAllowList(['127.0.0.0/8', 'fd00::/8'])
    for (const url of [
      'http://127.1/',
      'http://2130706433/',
      'http://[::ffff:127.0.0.1]/',
      'http://[fd12::1]/',
    ])
      assert.equal(refused(url, allow), false, url)
  })
})
