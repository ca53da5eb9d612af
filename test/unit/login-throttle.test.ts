import { describe, expect, it } from 'vitest'
import { LoginThrottle, RateLimited } from '../../sync-server/auth/login-throttle.js'

const limits = { freePerAccount: 3, freePerAddress: 5, lockoutBaseMs: 1000, lockoutMaxMs: 60_000 }

function refusal(fn: () => unknown): RateLimited | null {
  try {
    fn()
    return null
  } catch (e) {
    if (e instanceof RateLimited) return e
    throw e
  }
}

describe('[AUTH3] LoginThrottle', () => {
  it('[AUTH3] the free-th failure locks for the base time, and failures are forgotten lockoutMaxMs after the last one', () => {
    let now = 0
    const t = new LoginThrottle(limits, () => now)
    for (let i = 0; i < 3; i++) t.begin('a@x', '1.1.1.1').failed()
    const locked = refusal(() => t.begin('a@x', '2.2.2.2'))
    expect(locked?.code).toBe('rate_limited')
    expect(locked?.retryAfterSeconds).toBe(1)
    expect(locked?.httpStatus).toBe(429)
    now += 1000
    t.begin('a@x', '2.2.2.2').failed()
    expect(refusal(() => t.begin('a@x', '2.2.2.2'))?.retryAfterSeconds).toBe(2)
    // Long after the last failure the account starts afresh: three free failures again.
    now += 60_001 + 2000
    for (let i = 0; i < 2; i++) t.begin('a@x', `3.3.3.${i}`).failed()
    expect(refusal(() => t.begin('a@x', '3.3.3.9'))).toBeNull()
  })

  it('[AUTH3] concurrent attempts count: past the free failures only one is in flight at a time', () => {
    const t = new LoginThrottle(limits, () => 0)
    const admitted = []
    for (let i = 0; i < 10; i++) {
      try {
        admitted.push(t.begin('b@x', `9.9.9.${i}`))
      } catch (e) {
        expect(e).toBeInstanceOf(RateLimited)
      }
    }
    expect(admitted.length).toBe(3)
    // One abandoned (a storage error, say) is not a failure: a slot frees.
    admitted[0]!.abandoned()
    expect(refusal(() => t.begin('b@x', '9.9.9.99'))).toBeNull()
  })

  it('[AUTH3] a success clears the account, never the address', () => {
    const t = new LoginThrottle(limits, () => 0)
    for (let i = 0; i < 4; i++) t.begin(`spray${i}@x`, '5.5.5.5').failed()
    const ok = t.begin('mine@x', '5.5.5.5')
    ok.succeeded()
    t.begin('spray9@x', '5.5.5.5').failed()
    expect(refusal(() => t.begin('mine@x', '5.5.5.5'))?.code).toBe('rate_limited')
    expect(refusal(() => t.begin('mine@x', '6.6.6.6'))).toBeNull()
  })

  it('[AUTH3] the map of keys stays bounded under a flood of distinct emails and addresses', () => {
    const t = new LoginThrottle(limits, () => 0)
    for (let i = 0; i < 60_000; i++) t.begin(`u${i}@x`, `a${i}`).failed()
    expect(t.size).toBeLessThanOrEqual(100_000)
  })
})
