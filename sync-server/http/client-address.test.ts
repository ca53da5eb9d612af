import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ClientAddresses } from './client-address.js'

const req = (peer: string, xff?: string) => ({ socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }) as never

describe('[AUTH5] the client address behind trusted proxies', () => {
  it('reads X-Forwarded-For from the right past trusted hops only', () => {
    const none = ClientAddresses.parse(undefined)
    expect(none.of(req('10.0.0.5', '1.2.3.4'))).toBe('10.0.0.5')
    const lb = ClientAddresses.parse('10.0.0.0/8, ::1')
    expect(lb.of(req('::ffff:10.0.0.5', '1.2.3.4'))).toBe('1.2.3.4')
    expect(lb.of(req('10.0.0.5', '9.9.9.9, 1.2.3.4, 10.1.1.1'))).toBe('1.2.3.4')
    expect(lb.of(req('::1', '2001:db8::7'))).toBe('2001:db8::7')
    expect(lb.of(req('10.0.0.5'))).toBe('10.0.0.5')
    expect(lb.of(req('10.0.0.5', 'junk, 1.2.3.4'))).toBe('1.2.3.4')
    expect(lb.of(req('10.0.0.5', '1.2.3.4, junk'))).toBe('10.0.0.5')
    // A direct client (not a trusted proxy) cannot name another address.
    expect(lb.of(req('8.8.8.8', '1.2.3.4'))).toBe('8.8.8.8')
  })

  it('a typo in TRUSTED_PROXIES names the entry', () => {
    for (const bad of ['10.0.0.0/33', 'proxy.local', '10.0.0.1/8/2', '::1/129', '10.0.0.0/x']) {
      expect(() => ClientAddresses.parse(bad), bad).toThrow(/TRUSTED_PROXIES/)
    }
  })

  it('seeded property: whatever a client writes in the header, the answer is the nearest hop that is not a trusted proxy', () => {
    const trustedIps = ['10.0.0.1', '10.0.0.2']
    const addresses = ClientAddresses.parse(trustedIps.join(','))
    const ip = fc.oneof(fc.ipV4(), fc.constantFrom(...trustedIps))
    const junk = fc.oneof(fc.string({ maxLength: 8 }), fc.constant(''), fc.constant(' '))
    fc.assert(
      fc.property(fc.array(fc.oneof(ip, junk), { maxLength: 6 }), fc.array(ip, { maxLength: 4 }), ip, (clientWritten, proxied, peer) => {
        // The header: what the client wrote, then what the proxies appended (all addresses).
        const header = [...clientWritten, ...proxied].join(', ')
        const got = addresses.of(req(peer, header))
        // The truth: walking from the peer leftwards over appended hops while they are trusted.
        const chain = [...proxied, peer]
        let expected = peer
        for (let i = chain.length - 1; i >= 0; i--) {
          expected = chain[i]!
          if (!trustedIps.includes(expected)) break
        }
        if (trustedIps.includes(expected) && chain.every((h) => trustedIps.includes(h))) {
          // Every appended hop is trusted: the client's own writing decides only if it is an address.
          expect(got === expected || clientWritten.includes(got)).toBe(true)
        } else {
          expect(got).toBe(expected)
        }
      }),
      { seed: 20261204, numRuns: 2_000 },
    )
  })
})
