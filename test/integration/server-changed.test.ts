import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MuxType } from '../../shared/index.js'
import { MuxClient, api, createDocument, createSpace, grantRole, signup, startTestServer, waitFor, type TestServer } from '../helpers/index.js'

/** [SYNC3] Lists follow the change feed by push: a Changed hint for what the client may read. */
describe('[SYNC3] /mux pushes Changed hints for readable changes only', () => {
  let ts: TestServer
  beforeAll(async () => {
    ts = await startTestServer()
  })
  afterAll(() => ts.cleanup())

  it('a readable change is announced with its version; an unreadable one is not', async () => {
    const owner = await signup(ts.url)
    const reader = await signup(ts.url)
    const shared = await createSpace(ts.url, owner.token)
    const secret = await createSpace(ts.url, owner.token)
    await grantRole(ts.url, owner.token, shared, reader.userId, 'Viewer')
    const mux = await MuxClient.connect(ts.url, reader.token)
    const changed = () => mux.frames.filter((f) => f.type === MuxType.Changed).map((f) => (f as { version: number }).version)

    // Settle: the grant above may still be announced, and a fresh server's engines are still
    // writing readable nodes (the seeded templates' code checks); start counting once quiet.
    let quiet = changed().length
    for (let waited = 0; waited < 10_000; waited += 400) {
      await new Promise((r) => setTimeout(r, 400))
      if (changed().length === quiet) break
      quiet = changed().length
    }
    const before = changed().length
    const hidden = await createDocument(ts.url, owner.token, `${secret}/hidden`, { X: 1 })
    expect(hidden).toBeTruthy()
    await new Promise((r) => setTimeout(r, 300))
    expect(changed().length).toBe(before)

    const visible = await api(ts.url, owner.token).putNode(`${shared}/news`, 'Document', { Title: 'hello' })
    const version = (visible.body as { version: number }).version
    await waitFor(() => changed().some((v) => v >= version), { timeoutMs: 2_000, description: 'Changed hint' })
    await mux.close()
  })
})
