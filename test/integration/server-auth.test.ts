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
