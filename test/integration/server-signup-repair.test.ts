import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SYSTEM, type NodePath } from '../../shared/index.js'
import { TEST_PASSWORD, api, errorCode, signup, startTestServer, type TestServer } from '../helpers/index.js'

/**
 * A crash between creating an account and creating its User node leaves an account with no
 * node (and invites that cannot fire). Retrying the sign-up, or logging in, completes it.
 */
describe('[AUTH1] a sign-up cut short is completed, never stuck', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  async function halfSignedUp(): Promise<{ email: string; userId: string }> {
    const user = await signup(ts.url)
    // What a kill -9 between the two writes leaves behind: the account without its node.
    await ts.server.nodes.delete(SYSTEM, user.userId as NodePath)
    expect(await ts.server.nodes.get(SYSTEM, user.userId as NodePath)).toBeNull()
    return { email: user.email, userId: user.userId }
  }

  it('retrying the sign-up with the same password completes it (201, same user id)', async () => {
    const { email, userId } = await halfSignedUp()
    const res = await api(ts.url).post<{ userId: string; token: string }>('/api/auth/signup', { email, password: TEST_PASSWORD, name: 'Again' })
    expect(res.status).toBe(201)
    expect(res.body.userId).toBe(userId)
    const node = await ts.server.nodes.get(SYSTEM, userId as NodePath)
    expect(node?.content).toMatchObject({ Email: email, FullName: 'Again' })
  })

  it('a different password gets 409 email_taken and creates nothing', async () => {
    const { email, userId } = await halfSignedUp()
    const res = await api(ts.url).post('/api/auth/signup', { email, password: 'someone else entirely', name: 'Mallory' })
    expect(res.status).toBe(409)
    expect(errorCode(res)).toBe('email_taken')
    expect(await ts.server.nodes.get(SYSTEM, userId as NodePath)).toBeNull()
  })

  it('logging in completes it too', async () => {
    const { email, userId } = await halfSignedUp()
    const res = await api(ts.url).post<{ userId: string }>('/api/auth/login', { email, password: TEST_PASSWORD })
    expect(res.status).toBe(200)
    expect((await ts.server.nodes.get(SYSTEM, userId as NodePath))?.content.Email).toBe(email)
  })
})
