import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, signup, stockProvider, waitFor, type StockClient } from '../helpers/index.js'
import { startInstances, type Instances } from '../helpers/index.js'

/**
 * [SCALE4] Redis is the fast path, PostgreSQL the truth: Redis killed (SIGKILL) and started again
 * empty in the middle of edits on three instances loses nothing. Every write acknowledged during
 * the outage is durable, and each instance reads the ones it missed from the database.
 */
describe('[SCALE4] a Redis restart mid-edit', () => {
  let set: Instances | undefined
  const clients: StockClient[] = []
  afterAll(async () => {
    for (const c of clients) c.destroy()
    await set?.cleanup()
  })

  it('[SCALE4] edits made before, during and after the outage all reach every client and instance', { timeout: 180_000 }, async () => {
    set = await startInstances(3)
    const url = (i: number) => set!.servers[i]!.url
    const user = await signup(url(0))
    const space = await createSpace(url(0), user.token)
    const path = `${space}/through-outage`
    expect((await api(url(0), user.token).putNode(path, 'Document', {})).status).toBe(201)
    const a = stockProvider(url(0), path, user.token)
    const b = stockProvider(url(1), path, user.token)
    clients.push(a, b)
    await Promise.all([a.synced(), b.synced()])

    const expected: Record<string, string> = {}
    let n = 0
    const round = async (phase: string) => {
      for (let i = 0; i < 5; i++) {
        const k = n++
        a.content.set(`a${k}`, phase)
        b.content.set(`b${k}`, phase)
        expected[`a${k}`] = phase
        expected[`b${k}`] = phase
        // Acknowledged only once durable in PostgreSQL, whatever Redis is doing.
        expect((await api(url(2), user.token).patchNode(path, { [`h${k}`]: phase })).status).toBe(200)
        expected[`h${k}`] = phase
      }
    }
    const hasAll = (json: Record<string, unknown>) => Object.entries(expected).every(([k, v]) => json[k] === v)

    await round('before')
    await set.redis.stop()
    await round('during')
    // Even with Redis down, each instance finds the missing versions in the database.
    await waitFor(() => hasAll(a.json()) && hasAll(b.json()), { timeoutMs: 60_000, description: 'the outage edits on both clients' }).catch(async (e) => {
      const miss = (j: Record<string, unknown>) => Object.keys(expected).filter((k) => j[k] !== expected[k])
      console.log('a missing', miss(a.json()), 'b missing', miss(b.json()), 'i1', miss((await api(url(0), user.token).getNode(path)).body.content ?? {}), 'i2', miss((await api(url(1), user.token).getNode(path)).body.content ?? {}))
      for (const s of set!.servers) console.log(s.output().split('\n').filter((l) => !/"level":20/.test(l) && /cluster|catch|error|"level":[45]/i.test(l)).join('\n').slice(0, 2000))
      throw e
    })
    await set.redis.start()
    await round('after')
    await waitFor(() => hasAll(a.json()) && hasAll(b.json()), { timeoutMs: 60_000, description: 'every edit on both clients' })
    expect(a.json()).toEqual(b.json())
    for (let i = 0; i < 3; i++) {
      await waitFor(async () => hasAll((await api(url(i), user.token).getNode(path)).body.content ?? {}), { timeoutMs: 30_000, description: `instance ${i + 1} reads every edit` })
    }
  })
})
