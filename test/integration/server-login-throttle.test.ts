import { afterEach, describe, expect, it } from 'vitest'
import {
  MuxClient,
  api,
  createDocument,
  createSpace,
  errorCode,
  expectStatus,
  signup,
  startTestServer,
  uniqueEmail,
  type TestServer,
} from '../helpers/index.js'

const WRONG = 'not the password at all'

/** A server whose login throttle reads `clock.now` (moved by the test, never waited for). */
async function throttled(config: Record<string, number> = {}): Promise<{ ts: TestServer; clock: { now: number } }> {
  const clock = { now: 1_000_000 }
  const ts = await startTestServer({ config: { ...config, now: () => clock.now } })
  return { ts, clock }
}

function login(url: string, email: string, password: string) {
  return api(url).post<{ userId?: string; token?: string; error?: { code: string } }>('/api/auth/login', { email, password })
}

describe('[AUTH3] login throttling', () => {
  let ts: TestServer | null = null
  afterEach(async () => {
    await ts?.cleanup()
    ts = null
  })

  it('[AUTH3] after 5 wrong passwords an account answers 429 rate_limited with Retry-After, even to the right password; after the lockout the right one works', async () => {
    const s = await throttled()
    ts = s.ts
    const alice = await signup(ts.url)
    for (let i = 0; i < 5; i++) {
      const res = await login(ts.url, alice.email, WRONG)
      expect(res.status, `failure ${i + 1}`).toBe(401)
      expect(errorCode(res)).toBe('invalid_credentials')
    }
    for (const password of [WRONG, alice.password]) {
      const locked = await login(ts.url, alice.email, password)
      expect(locked.status).toBe(429)
      expect(errorCode(locked)).toBe('rate_limited')
      expect(Number(locked.headers.get('retry-after'))).toBe(1)
    }
    // Refusals while locked are not failures: the lockout did not grow.
    s.clock.now += 1000
    expectStatus(await login(ts.url, alice.email, alice.password), 200)
    // A success forgets the account's failures.
    expect((await login(ts.url, alice.email, WRONG)).status).toBe(401)
    expectStatus(await login(ts.url, alice.email, alice.password), 200)
  })

  it('[AUTH3] each further failure doubles the lockout, up to the maximum', async () => {
    const s = await throttled({ loginLockoutMaxMs: 8_000 })
    ts = s.ts
    const bob = await signup(ts.url)
    for (let i = 0; i < 5; i++) await login(ts.url, bob.email, WRONG)
    const waits: number[] = []
    for (let i = 0; i < 5; i++) {
      const locked = await login(ts.url, bob.email, WRONG)
      expect(locked.status).toBe(429)
      const seconds = Number(locked.headers.get('retry-after'))
      waits.push(seconds)
      s.clock.now += seconds * 1000
      expect((await login(ts.url, bob.email, WRONG)).status).toBe(401)
    }
    expect(waits).toEqual([1, 2, 4, 8, 8])
  })

  it('[AUTH3] an unknown email is throttled like a known one (the answer never tells which exist)', async () => {
    const s = await throttled()
    ts = s.ts
    const ghost = uniqueEmail('ghost')
    for (let i = 0; i < 5; i++) expect((await login(ts.url, ghost, WRONG)).status).toBe(401)
    const locked = await login(ts.url, ghost, WRONG)
    expect(locked.status).toBe(429)
    expect(locked.headers.get('retry-after')).toBe('1')
  })

  it("[AUTH3] one account's failures do not lock another account from the same address, until the address budget (20) is spent", async () => {
    const s = await throttled()
    ts = s.ts
    const alice = await signup(ts.url)
    const bob = await signup(ts.url)
    for (let i = 0; i < 5; i++) await login(ts.url, alice.email, WRONG)
    expect((await login(ts.url, alice.email, WRONG)).status).toBe(429)
    // Same address (127.0.0.1), another account: not locked.
    expectStatus(await login(ts.url, bob.email, bob.password), 200)
    // Guesses spread over many emails: the 20th failure from the address locks the address.
    let failures = 5
    for (let i = 0; failures < 20; i++) {
      const res = await login(ts.url, uniqueEmail(`spray${i}`), WRONG)
      expect(res.status, `failure ${failures + 1} from the address`).toBe(401)
      failures++
    }
    const locked = await login(ts.url, bob.email, bob.password)
    expect(locked.status).toBe(429)
    expect(errorCode(locked)).toBe('rate_limited')
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    // A success from the address does not buy it more guesses: bob's login after the lockout works,
    // and the next wrong guess from the address locks it again at once.
    s.clock.now += 1000
    expectStatus(await login(ts.url, bob.email, bob.password), 200)
    expect((await login(ts.url, uniqueEmail('spray-more'), WRONG)).status).toBe(401)
    expect((await login(ts.url, bob.email, bob.password)).status).toBe(429)
  })

  it('[AUTH5] behind a trusted proxy the address is the client\'s from X-Forwarded-For; without one the header is ignored', async () => {
    const from = (url: string, forwarded: string) => (email: string) =>
      fetch(`${url}/api/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': forwarded }, body: JSON.stringify({ email, password: WRONG }) }).then((r) => r.status)
    const behind = await startTestServer({ config: { loginFreeFailuresPerAddress: 3, now: () => 1_000_000, trustedProxies: ['127.0.0.1'] } })
    try {
      const a = from(behind.url, '203.0.113.7')
      for (let i = 0; i < 3; i++) expect(await a(uniqueEmail(`a${i}`)), `failure ${i + 1} of .7`).toBe(401)
      expect(await a(uniqueEmail('a-more'))).toBe(429)
      // Another client behind the same proxy still has its own budget.
      expect(await from(behind.url, '203.0.113.8')(uniqueEmail('b'))).toBe(401)
      // What a client writes in front of the hops our proxy appended does not change who it is.
      expect(await from(behind.url, '198.51.100.1, 203.0.113.7')(uniqueEmail('spoof'))).toBe(429)
      // Garbage in the header is no address: the proxy's own hop stands.
      expect(await from(behind.url, 'not-an-ip')(uniqueEmail('junk'))).toBe(401)
    } finally {
      await behind.cleanup()
    }
    const direct = await startTestServer({ config: { loginFreeFailuresPerAddress: 3, now: () => 1_000_000 } })
    try {
      for (let i = 0; i < 3; i++) expect(await from(direct.url, `203.0.113.${i}`)(uniqueEmail(`d${i}`))).toBe(401)
      // Every request came from 127.0.0.1 whatever its header said: that address is locked.
      expect(await from(direct.url, '203.0.113.99')(uniqueEmail('d-more'))).toBe(429)
    } finally {
      await direct.cleanup()
    }
  })

  it('[AUTH3] a burst of 60 concurrent wrong guesses gets no more answers than guesses sent one by one', async () => {
    const s = await throttled()
    ts = s.ts
    const carol = await signup(ts.url)
    const answers = await Promise.all(Array.from({ length: 60 }, () => login(ts!.url, carol.email, WRONG)))
    const statuses = answers.map((a) => a.status)
    expect(statuses.filter((st) => st === 401).length).toBeLessThanOrEqual(5)
    expect(statuses.filter((st) => st === 429).length).toBeGreaterThanOrEqual(55)
    expect(statuses.every((st) => st === 401 || st === 429)).toBe(true)
    for (const a of answers.filter((x) => x.status === 429)) expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  })
})

describe('[AUTH4] tokens only in the Authorization header on HTTP', () => {
  let ts: TestServer | null = null
  afterEach(async () => {
    await ts?.cleanup()
    ts = null
  })

  it('[AUTH4] ?token= on HTTP is not a credential (401, naming the header); the header is; WebSockets still take ?token=', async () => {
    ts = await startTestServer()
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const doc = await createDocument(ts.url, user.token, `${space}/doc`, { A: 1 })
    const anon = api(ts.url)
    for (const path of [`/api/me?token=${user.token}`, `/api/nodes/${doc}?token=${user.token}`, `/api/nodes?parent=${space}&token=${user.token}`, `/api/changes?since=0&token=${user.token}`]) {
      const res = await anon.get(path)
      expect(res.status, path).toBe(401)
      expect(errorCode(res)).toBe('unauthorized')
      expect((res.body as { error: { message: string } }).error.message).toMatch(/Authorization: Bearer/)
    }
    const logout = await anon.request('POST', `/api/auth/logout?token=${user.token}`)
    expect(logout.status).toBe(401)
    // The token still works (the URL one did not log it out), in the header.
    expectStatus(await api(ts.url, user.token).get('/api/me'), 200)
    expectStatus(await api(ts.url, user.token).getNode(doc), 200)
    // The WebSocket upgrade keeps ?token= (a browser cannot set headers on it).
    const mux = await MuxClient.connect(ts.url, user.token)
    try {
      expect(await mux.join(doc)).toMatchObject({ ok: true })
    } finally {
      await mux.close()
    }
  })
})
