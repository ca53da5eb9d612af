import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { jsonEqual } from '../../shared/index.js'
import { api, createDocument, createSpace, expectStatus, freshDatabase, makeTempDir, removeDir, signup, startInstances, startTestServer, waitFor, type Instances } from '../helpers/index.js'
import { holdCopy, reconnect, restoreOverDeleted } from './tombstone-cases.js'

/** [TOMB1] [TOMB2] Tombstones on PostgreSQL: the restore's forward path, and several instances. */
const drops: (() => Promise<void>)[] = []
const dirs: string[] = []
afterAll(async () => {
  for (const d of drops) await d().catch(() => undefined)
  for (const d of dirs) await removeDir(d)
})

describe('tombstones on PostgreSQL', () => {
  it('[TOMB2] a node deleted after the backup comes back as the backup has it: a stale copy newer than the backup does not revert the restore; a node the restore deletes leaves a tombstone', { timeout: 300_000 }, async () => {
    const db = await freshDatabase('weft_tomb_')
    drops.push(db.drop)
    const dir = await makeTempDir('weft-tomb-pg-')
    dirs.push(dir)
    await restoreOverDeleted({ start: () => startTestServer({ config: { databaseUrl: db.url } }), env: { DATABASE_URL: db.url }, file: join(dir, 'tomb.weftbak') })
  })

  it('[TOMB1] [SCALE2] deleted on one instance while a copy was loaded on another (its row write still due), created again on a third: the copy reconnecting there at once brings nothing back, and that instance serves the new node', { timeout: 120_000 }, async () => {
    let set: Instances | undefined
    try {
      set = await startInstances(3)
      const url = (i: number) => set!.servers[i]!.url
      const alice = await signup(url(0))
      const space = await createSpace(url(0), alice.token)
      const path = `${space}/again`
      await createDocument(url(0), alice.token, path, { Old: 'secret' })
      // The copy is made on instance 2, which keeps the node loaded.
      const stale = await holdCopy(url(1), path, alice.token, { Later: 1 })
      expectStatus(await api(url(0), alice.token).deleteNode(path), 204)
      await createDocument(url(2), alice.token, path, { Fresh: true })
      const s = await reconnect(url(1), path, alice.token, stale, 'stale')
      // Every instance converges on the same content (the others hear of the probe through Redis).
      for (let i = 0; i < 3; i++) {
        await waitFor(async () => jsonEqual((await api(url(i), alice.token).getNode(path)).body.content, { Fresh: true, Probe: 'stale' }), {
          timeoutMs: 20_000,
          description: `instance ${i + 1} has the new node and the probe`,
        })
      }
      expect(s.json()).toEqual({ Fresh: true, Probe: 'stale' })
      s.destroy()
    } finally {
      await set?.cleanup()
    }
  })
})
