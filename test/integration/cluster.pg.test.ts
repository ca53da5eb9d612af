import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CloseCode } from '../../shared/index.js'
import { api, createSpace, grantRole, login, openRawSocket, signup, stockProvider, waitFor, type StockClient, type TestUser } from '../helpers/index.js'
import { metricValue, startInstances, type Instances } from '../helpers/index.js'

/**
 * Several instances (issue 20): three servers as child processes on one fresh PostgreSQL
 * database and a private Redis, clients on different instances.
 */
const METRICS = 'cluster-metrics-token'

/** The `weft_loaded_docs` gauge of one instance. */
const loadedDocs = (url: string): Promise<number> => metricValue(url, METRICS, 'weft_loaded_docs')

describe('Several instances on one PostgreSQL, fanned out through Redis', () => {
  let set: Instances
  let user: TestUser
  let space = ''
  const clients: StockClient[] = []
  const url = (i: number) => set.servers[i]!.url

  beforeAll(async () => {
    // Metrics for [SCALE9]'s loaded-docs figure; no idle unloading while a test looks at it.
    set = await startInstances(3, { METRICS_TOKEN: METRICS, IDLE_UNLOAD_MS: '600000' })
    user = await signup(url(0))
    space = await createSpace(url(0), user.token)
  }, 120_000)
  afterAll(async () => {
    for (const c of clients) c.destroy()
    await set?.cleanup()
  })

  function client(i: number, path: string, token = user.token): StockClient {
    const c = stockProvider(url(i), path, token)
    clients.push(c)
    return c
  }

  it('[SCALE1] a client on instance 1 and one on instance 2 editing one node converge; an HTTP write on instance 3 reaches both', { timeout: 60_000 }, async () => {
    const path = `${space}/shared`
    expect((await api(url(0), user.token).putNode(path, 'Document', { Title: 'start' })).status).toBe(201)
    const a = client(0, path)
    const b = client(1, path)
    await Promise.all([a.synced(), b.synced()])
    a.content.set('FromA', 'a1')
    b.content.set('FromB', 'b1')
    await waitFor(() => a.json().FromB === 'b1' && b.json().FromA === 'a1', { timeoutMs: 20_000, description: 'both edits on both clients' })
    expect((await api(url(2), user.token).patchNode(path, { FromHttp: 'h1' })).status).toBe(200)
    await waitFor(() => a.json().FromHttp === 'h1' && b.json().FromHttp === 'h1', { timeoutMs: 20_000, description: 'the HTTP write on both clients' })
    expect(a.json()).toEqual(b.json())
    // Every instance reads the same durable node.
    for (let i = 0; i < 3; i++) {
      const n = await waitFor(async () => {
        const body = (await api(url(i), user.token).getNode(path)).body
        return body.content?.FromA === 'a1' && body.content.FromB === 'b1' && body.content.FromHttp === 'h1' ? body : null
      }, { timeoutMs: 20_000, description: `instance ${i + 1} reads every write` })
      expect(n.content.Title).toBe('start')
    }
  })

  it('[SCALE12] an edit reaches a client on another instance while its commit still waits on the database, and is durable once it can commit', { timeout: 60_000 }, async () => {
    const path = `${space}/early`
    expect((await api(url(0), user.token).putNode(path, 'Document', { Title: 'start' })).status).toBe(201)
    const a = client(0, path)
    const b = client(1, path)
    await Promise.all([a.synced(), b.synced()])
    // Every instance's commit takes the version counter's row lock: held here, none can commit.
    const blocker = new pg.Client({ connectionString: set.databaseUrl })
    await blocker.connect()
    try {
      await blocker.query('BEGIN')
      await blocker.query('SELECT value FROM version_counter WHERE id = 1 FOR UPDATE')
      a.content.set('Early', 'e1')
      await waitFor(() => b.json().Early === 'e1', { timeoutMs: 20_000, description: 'the edit on the client of instance 2 before any commit' })
      // Nothing was committed meanwhile: the stored node does not have it yet.
      const stored = await blocker.query<{ n: string }>("SELECT count(*) AS n FROM changes WHERE path = $1", [path])
      expect(Number(stored.rows[0]!.n)).toBe(1)
    } finally {
      await blocker.query('ROLLBACK')
      await blocker.end()
    }
    for (let i = 0; i < 3; i++) {
      await waitFor(async () => (await api(url(i), user.token).getNode(path)).body.content?.Early === 'e1', { timeoutMs: 20_000, description: `instance ${i + 1} reads the edit once committed` })
    }
  })

  it('[AUTH7] a logout on one instance ends the token on the others: their open socket closes 4401 and HTTP answers 401', { timeout: 60_000 }, async () => {
    const u = await signup(url(0))
    const other = await login(url(0), u.email)
    // Instance 2 has read the token (kept in memory) and holds a socket signed in with it.
    expect((await api(url(1), u.token).get('/api/me')).status).toBe(200)
    const mux = await openRawSocket(url(1), `/mux?token=${u.token}`)
    expect((await api(url(0), u.token).post('/api/auth/logout')).status).toBe(204)
    // Nothing asks instance 2 about the token: only the revocation told over Redis closes it.
    expect((await mux.closed).code).toBe(CloseCode.Unauthorized)
    expect((await api(url(1), u.token).get('/api/me')).status).toBe(401)
    expect((await api(url(2), u.token).get('/api/me')).status).toBe(401)
    expect((await api(url(1), other.token).get('/api/me')).status).toBe(200)
  })

  it('[SCALE3] presence made on one instance is seen on the other, both ways', { timeout: 60_000 }, async () => {
    const path = `${space}/presence`
    await api(url(0), user.token).putNode(path, 'Document', {})
    const a = client(0, path)
    await a.synced()
    a.provider.awareness.setLocalStateField('spot', { at: 'on-one' })
    // b joins later: it must get the presence made before its room opened on instance 2.
    const b = client(1, path)
    await b.synced()
    b.provider.awareness.setLocalStateField('spot', { at: 'on-two' })
    const names = (c: StockClient) => [...c.provider.awareness.getStates().values()].map((s) => (s.spot as { at?: string } | undefined)?.at).filter(Boolean).sort()
    await waitFor(() => names(a).length === 2 && names(b).length === 2, { timeoutMs: 20_000, description: 'both presences on both clients' })
    expect(names(a)).toEqual(['on-one', 'on-two'])
    expect(names(b)).toEqual(['on-one', 'on-two'])
    // Leaving on instance 1 removes the presence on instance 2.
    a.provider.disconnect()
    await waitFor(() => names(b).length === 1, { timeoutMs: 20_000, description: 'the left client gone on instance 2' })
    expect(names(b)).toEqual(['on-two'])
  })

  it('[SCALE5] the gate decides alike on every instance: a grant and a revocation made on one reach the others', { timeout: 60_000 }, async () => {
    const other = await signup(url(1))
    const path = `${space}/gated`
    await api(url(0), user.token).putNode(path, 'Document', { Secret: 1 })
    // Read first on instance 3, so its access cache holds the refusal.
    expect((await api(url(2), other.token).getNode(path)).status).toBe(403)
    const grant = await grantRole(url(0), user.token, space, other.userId, 'Viewer')
    for (const i of [1, 2]) {
      await waitFor(async () => (await api(url(i), other.token).getNode(path)).status === 200, { timeoutMs: 20_000, description: `the grant reaches instance ${i + 1}` })
    }
    const revoked = await api(url(1), user.token).deleteNode(grant)
    expect([200, 204]).toContain(revoked.status)
    for (const i of [0, 2]) {
      await waitFor(async () => (await api(url(i), other.token).getNode(path)).status === 403, { timeoutMs: 20_000, description: `the revocation reaches instance ${i + 1}` })
    }
  })

  it('[SCALE9] HTTP writes spread over the instances on the same nodes: every write kept, a copy loaded here takes the others\' updates and stays loaded', { timeout: 90_000 }, async () => {
    const docs = [`${space}/rr0`, `${space}/rr1`]
    for (const d of docs) expect((await api(url(0), user.token).putNode(d, 'Document', { Start: true })).status).toBe(201)
    // Each instance writes each node once (so each holds a copy with its doc), then round robin.
    const expected: Record<string, Record<string, number>> = { [docs[0]!]: { Start: 1 }, [docs[1]!]: { Start: 1 } }
    let n = 0
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 3; i++) {
        for (const d of docs) {
          const key = `K${n++}`
          expect((await api(url(i), user.token).patchNode(d, { [key]: round })).status).toBe(200)
          expected[d]![key] = round
        }
      }
    }
    // Instance 1 writes last, so it holds both copies now (with their docs).
    for (const d of docs) {
      const key = `K${n++}`
      expect((await api(url(0), user.token).patchNode(d, { [key]: 4 })).status).toBe(200)
      expected[d]![key] = 4
    }
    const loaded = await loadedDocs(url(0))
    // Writes on instances 2 and 3 only: instance 1's copies take them and are not dropped.
    for (let round = 5; round < 9; round++) {
      for (const i of [1, 2]) {
        for (const d of docs) {
          const key = `K${n++}`
          expect((await api(url(i), user.token).patchNode(d, { [key]: round })).status).toBe(200)
          expected[d]![key] = round
        }
      }
    }
    const complete = (content: Record<string, unknown> | undefined, d: string) => Object.keys(expected[d]!).every((k) => k === 'Start' || content?.[k] === expected[d]![k])
    for (let i = 0; i < 3; i++) {
      for (const d of docs) {
        await waitFor(async () => complete((await api(url(i), user.token).getNode(d)).body.content, d), { timeoutMs: 20_000, description: `instance ${i + 1} reads every write of ${d}` })
      }
    }
    expect(await loadedDocs(url(0))).toBeGreaterThanOrEqual(loaded)
    // A write through instance 1's kept copy undoes none of the others' (the stored row, read fresh).
    for (const d of docs) expect((await api(url(0), user.token).patchNode(d, { Last: 1 })).status).toBe(200)
    for (let i = 0; i < 3; i++) {
      for (const d of docs) {
        await waitFor(async () => {
          const content = (await api(url(i), user.token).getNode(d)).body.content
          return complete(content, d) && content?.Last === 1
        }, { timeoutMs: 20_000, description: `instance ${i + 1} reads every write of ${d} after the last` })
      }
    }
  })
})
