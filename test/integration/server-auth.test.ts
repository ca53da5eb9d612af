import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CloseCode } from '../../shared/index.js'
import {
  MuxClient,
  api,
  errorCode,
  login,
  openRawSocket,
  signup,
  startTestServer,
  stockProvider,
  uniqueEmail,
  waitFor,
  type TestServer,
} from '../helpers/index.js'

/** Sign-up, login, `/api/me` and logout, as a client sees them. */
describe('server auth', () => {
  let ts: TestServer

  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(async () => {
    await ts.cleanup()
  })

  it('[ACC4] signup creates the User node at {userId}; login returns the same user; /api/me describes them', async () => {
    const email = uniqueEmail('auth')
    const user = await signup(ts.url, email, undefined, 'Ada Lovelace')
    expect(user.userId).toMatch(/^[A-Za-z0-9_.@-]+$/)
    expect(user.token.length).toBeGreaterThan(16)

    const node = await api(ts.url, user.token).getNode(user.userId)
    expect(node.status).toBe(200)
    expect(node.body).toMatchObject({ path: user.userId, nodeType: 'User' })
    expect(node.body.content.Email).toBe(email)

    const again = await login(ts.url, email)
    expect(again.userId).toBe(user.userId)
    expect(again.token).not.toBe(user.token)

    const me = await api(ts.url, again.token).get<{ userId: string; email: string; name: string }>('/api/me')
    expect(me.status).toBe(200)
    expect(me.body).toMatchObject({ userId: user.userId, email, name: 'Ada Lovelace' })
  })

  it("[AUTH6] a Space someone makes at a new account's id while its sign-up runs never becomes that person's home", async () => {
    const mallory = await signup(ts.url)
    const local = `squat${Date.now().toString(36)}`
    // Between the account's insert and its User node, Mallory puts a Space at the predictable id
    // (an interleaving a race finds about 1 time in 8; made certain here).
    const storage = ts.server.storage
    const createAccount = storage.createAccount.bind(storage)
    let squatted = 0
    storage.createAccount = async (account) => {
      await createAccount(account)
      if (account.userId === local) squatted = (await api(ts.url, mallory.token).request('PUT', `/api/nodes/${local}`, { body: { nodeType: 'Space', content: {} }, headers: { 'if-none-match': '*' } })).status
    }
    let victim: Awaited<ReturnType<typeof signup>>
    try {
      victim = await signup(ts.url, `${local}@example.com`, undefined, 'Victim')
    } finally {
      storage.createAccount = createAccount
    }
    expect(squatted).toBe(201)
    // The account gave that id up and took another; its home is its own User node.
    expect(victim.userId).not.toBe(local)
    const home = await api(ts.url, victim.token).getNode(victim.userId)
    expect(home.body).toMatchObject({ nodeType: 'User', createdBy: 'system', content: { Email: `${local}@example.com` } })
    expect((await api(ts.url, mallory.token).getNode(victim.userId)).status).toBe(403)
    // What she keeps at home, Mallory does not read; Mallory's Space stays hers.
    expect((await api(ts.url, victim.token).putNode(`${victim.userId}/diary`, 'Document', { Text: 'private' })).status).toBe(201)
    expect(errorCode(await api(ts.url, mallory.token).getNode(`${victim.userId}/diary`))).toBe('forbidden')
    expect((await api(ts.url, mallory.token).getNode(local)).body).toMatchObject({ nodeType: 'Space', createdBy: mallory.userId })
    expect((await login(ts.url, `${local}@example.com`)).userId).toBe(victim.userId)
  })

  it('[AUTH6] no account gets an id the server writes for itself (system, agent) or a top-level place of its own (admin, api)', async () => {
    for (const local of ['system', 'agent', 'admin', 'api']) {
      const user = await signup(ts.url, `${local}@${Date.now().toString(36)}.example`)
      expect(user.userId).not.toBe(local)
      expect(user.userId.startsWith(`${local}-`)).toBe(true)
    }
  })

  it('signup refuses a malformed request with a code and creates nothing', async () => {
    const anon = api(ts.url)
    const noPassword = await anon.post('/api/auth/signup', { email: uniqueEmail(), name: 'X' })
    expect(noPassword.status).toBeGreaterThanOrEqual(400)
    expect(noPassword.status).toBeLessThan(500)
    expect(typeof errorCode(noPassword)).toBe('string')
    const badEmail = await anon.post('/api/auth/signup', { email: 'not an email', password: 'long enough password', name: 'X' })
    expect(badEmail.status).toBeGreaterThanOrEqual(400)
    expect(badEmail.status).toBeLessThan(500)
  })

  it('logout revokes the token: HTTP 401, and sockets opened with it close 4401', async () => {
    const user = await signup(ts.url)
    const other = await login(ts.url, user.email)
    const http = api(ts.url, user.token)
    expect((await http.get('/api/me')).status).toBe(200)
    const out = await http.post('/api/auth/logout')
    expect(out.status).toBe(204)

    const after = await http.get('/api/me')
    expect(after.status).toBe(401)
    expect(errorCode(after)).toBe('unauthorized')
    const mux = await openRawSocket(ts.url, `/mux?token=${user.token}`)
    expect((await mux.closed).code).toBe(CloseCode.Unauthorized)
    const sync = stockProvider(ts.url, user.userId, user.token)
    try {
      await waitFor(() => sync.closes.length > 0, { description: '/sync refuses the revoked token' })
      expect(sync.closes[0]?.code).toBe(CloseCode.Unauthorized)
    } finally {
      sync.destroy()
    }

    // Only that token: the user's other session still works.
    expect((await api(ts.url, other.token).get('/api/me')).status).toBe(200)
    const m = await MuxClient.connect(ts.url, other.token)
    try {
      expect(await m.join(user.userId)).toMatchObject({ ok: true })
    } finally {
      await m.close()
    }
  })
})
