import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PARTITIONS_HOLDER, PgLeaseStore } from '../../sync-server/cluster/pg-leases.js'
import type { Lease, LeaseBusy } from '../../sync-server/engines/index.js'
import { freshDatabase } from '../helpers/index.js'

/** [SCALE6] [SCALE17] The engine-partition lease table on the machine's PostgreSQL. */
/** The lease taken (failing the test when it was not). */
function won(r: Lease | LeaseBusy | null): Lease {
  expect(r && !('busy' in r), JSON.stringify(r)).toBe(true)
  return r as Lease
}

/** Not taken: busy, free in about `ms` (to a second). */
function busyFor(r: Lease | LeaseBusy | null, ms: number): void {
  expect(r).toMatchObject({ busy: true })
  expect(Math.abs((r as LeaseBusy).freeInMs - ms)).toBeLessThan(1_000)
}

describe('[SCALE17] PostgreSQL engine leases', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>
  let store: PgLeaseStore
  let client: pg.Client
  beforeAll(async () => {
    db = await freshDatabase('weft_leases_')
    store = await PgLeaseStore.open(db.url)
    client = new pg.Client({ connectionString: db.url })
    await client.connect()
  })
  afterAll(async () => {
    await client?.end()
    await store?.close()
    await db?.drop()
  })

  it('one holder at a time, the fence raised by every acquire; renew and release only with the lease held', async () => {
    const a = won(await store.acquire('engines:x', 'i1', 60_000))
    expect(a).toMatchObject({ holder: 'i1', fence: 1 })
    busyFor(await store.acquire('engines:x', 'i2', 60_000), 60_000)
    expect(await store.renew('engines:x', { ...a, fence: 0 }, 60_000)).toBeNull()
    expect(await store.renew('engines:x', a, 60_000)).toMatchObject({ holder: 'i1', fence: 1 })
    await store.release('engines:x', { ...a, holder: 'i2' })
    busyFor(await store.acquire('engines:x', 'i2', 60_000), 60_000)
    await store.release('engines:x', a)
    expect(await store.renew('engines:x', a, 60_000)).toBeNull()
    expect(won(await store.acquire('engines:x', 'i2', 60_000))).toMatchObject({ holder: 'i2', fence: 2 })
  })

  it('a grace: a free lease is taken only once it has been free that long', async () => {
    const a = won(await store.acquire('engines:g', 'i1', 60_000))
    await store.release('engines:g', a)
    // Free now, but not for a minute yet: busy for about that long.
    busyFor(await store.acquire('engines:g', 'i2', 60_000, 60_000), 60_000)
    // Free for an hour (as if released then): taken with the grace.
    await client.query(`UPDATE engine_leases SET expires_at = now() - interval '1 hour' WHERE name = 'engines:g'`)
    expect(won(await store.acquire('engines:g', 'i2', 60_000, 60_000))).toMatchObject({ holder: 'i2', fence: 2 })
  })

  it('the census counts the instances alive, itself included; one that left or expired is counted out', async () => {
    expect(await store.census('c1', 60_000)).toBe(1)
    expect(await store.census('c2', 60_000)).toBe(2)
    expect(await store.census('c1', 60_000)).toBe(2)
    await store.leave('c2')
    expect(await store.census('c1', 60_000)).toBe(1)
    await store.census('c3', 60_000)
    await client.query(`UPDATE engine_members SET expires_at = now() - interval '1 second' WHERE holder = 'c3'`)
    expect(await store.census('c1', 60_000)).toBe(1)
    // Its own row expired: it still counts itself (and renews it).
    await client.query(`UPDATE engine_members SET expires_at = now() - interval '1 second' WHERE holder = 'c1'`)
    expect(await store.census('c1', 60_000)).toBe(1)
    expect(await store.census('c4', 60_000)).toBe(2)
    await client.query(`DELETE FROM engine_members`)
  })

  it('while an earlier version holds the single `engines` lease, no partition lease is taken or renewed; while partitions are held, an earlier version cannot take it (a rolling upgrade)', async () => {
    // How an earlier version takes the `engines` lease (its statement, verbatim).
    const oldAcquire = (holder: string) =>
      client.query(
        `INSERT INTO engine_leases AS l (name, holder, fence, expires_at) VALUES ('engines', $1, 1, now() + interval '60 seconds')
         ON CONFLICT (name) DO UPDATE SET holder = $1, fence = l.fence + 1, expires_at = now() + interval '60 seconds'
         WHERE l.expires_at <= now() OR l.holder IS NULL
         RETURNING holder, fence`,
        [holder],
      )
    const p = won(await store.acquire('engines:u', 'i1', 60_000))
    // Partitions are held: the row is kept taken, an earlier version cannot have it.
    expect((await oldAcquire('old')).rowCount).toBe(0)
    const row = await client.query<{ holder: string }>(`SELECT holder FROM engine_leases WHERE name = 'engines'`)
    expect(row.rows[0]?.holder).toBe(PARTITIONS_HOLDER)
    // An earlier version that held it all along (from before any partition was held).
    await client.query(`UPDATE engine_leases SET holder = 'old', fence = fence + 1, expires_at = now() + interval '60 seconds' WHERE name = 'engines'`)
    // Not taken, and no hint to try again soon (it is not a matter of time).
    expect(await store.acquire('engines:v', 'i1', 60_000)).toBeNull()
    expect(await store.renew('engines:u', p, 60_000)).toBeNull()
    await client.query(`UPDATE engine_leases SET expires_at = now() - interval '1 second' WHERE name = 'engines:u'`)
    expect(await store.acquire('engines:u', 'i2', 60_000)).toBeNull()
    // It stops and gives the lease up: partitions are taken again, and the row kept taken.
    await client.query(`UPDATE engine_leases SET holder = NULL, expires_at = now() WHERE name = 'engines'`)
    expect(won(await store.acquire('engines:v', 'i1', 60_000))).toMatchObject({ holder: 'i1', fence: 1 })
    expect((await oldAcquire('old2')).rowCount).toBe(0)
  })
})
