import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { restoreBackup, takeBackup } from '../../sync-server/backup/index.js'
import { sqliteFile } from '../../sync-server/backup/exec.js'
import { openPostgresStorage, openSqliteStorage } from '../../sync-server/storage/index.js'
import { api, createSpace, errorCode, expectStatus, freshDatabase, makeTempDir, removeDir, signup, startTestServer, waitFor } from '../helpers/index.js'
import { checkCounterSnapshot, dumpTables, metaOf, runWeft, seedNodes, startCounterWriter, withoutLeases } from '../helpers/backup-fixtures.js'
import { Rng } from '../sim/rng.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

/** `weft backup` / `weft restore` on PostgreSQL: each test's databases are its own (CREATE DATABASE), as the CLI sees DATABASE_URL. */
const drops: (() => Promise<void>)[] = []
const dirs: string[] = []
async function database(): Promise<string> {
  const db = await freshDatabase('weft_backup_')
  drops.push(db.drop)
  return db.url
}
afterAll(async () => {
  for (const d of drops) await d().catch(() => undefined)
  for (const d of dirs) await removeDir(d)
})

/** Characters a dump's quoting, escaping or null marker could trip over, beside ordinary and non-Latin text. */
const AWKWARD = ['\t', '\n', '\r', '\\', '\\N', '\\x41', 'N', '\\.', '.', ' ', '"', "'", ',', '日本語', '名前', '😀', '\u2028', 'é', 'a', 'Z', '0']
const awkward = (rng: Rng, max = 8) => Array.from({ length: rng.int(0, max) }, () => rng.pick(AWKWARD)).join('')

describe('weft backup / weft restore on PostgreSQL', () => {
  it('[BAK3] a fresh restore of every column kind comes out identical, whatever characters its text holds, big rows among them (seeded)', { timeout: 300_000 }, async () => {
    const seed = Number(process.env.BAK_COPY_SEED ?? 20261205)
    const rng = new Rng(seed)
    const dir = await makeTempDir('weft-backup-copy-')
    dirs.push(dir)
    const storage = openSqliteStorage({ file: sqliteFile(dir) })
    await seedNodes(storage, 'Sp', 300, 20)
    await storage.close()
    // Every text, JSON, bytes, null and boolean column of every table gets awkward values, written
    // under the storage's feet (the restore copies rows, it does not reinterpret them).
    const db = new Database(sqliteFile(dir))
    try {
      const nodes = db.prepare('SELECT path FROM nodes ORDER BY path').all() as { path: string }[]
      const setNode = db.prepare('UPDATE nodes SET name = ?, created_by = ?, content = ?, content_stale = ?, snapshot = ? WHERE path = ?')
      const bind = db.prepare('INSERT OR IGNORE INTO node_clients (path, client, principal) VALUES (?, ?, ?)')
      for (const { path } of nodes) {
        const content = { [awkward(rng) || 'k']: awkward(rng), List: [awkward(rng), rng.int(0, 9)], Nested: { [awkward(rng) || 'n']: awkward(rng) } }
        setNode.run(awkward(rng) || 'x', awkward(rng) || 'u', JSON.stringify(content), rng.int(0, 1), rng.next() < 0.5 ? null : Buffer.from([0, 9, 10, 13, 92, 255]), path)
        bind.run(path, rng.int(1, 2 ** 31), `user:${awkward(rng)}`)
      }
      // Three snapshots of 7 MB (9.3 MB of base64 each): the nodes' batch is written before it holds 200 of them.
      for (const { path } of nodes.slice(100, 103)) db.prepare('UPDATE nodes SET snapshot = ? WHERE path = ?').run(randomBytes(7 << 20), path)
      for (let i = 0; i < 40; i++) {
        db.prepare('INSERT INTO accounts (user_id, email, password_hash, created_at) VALUES (?, ?, ?, ?)').run(`u${i}${awkward(rng)}`, `${i}${awkward(rng)}@x`, awkward(rng), awkward(rng))
        db.prepare('INSERT INTO trash (path, original_path, name, node_type, deleted_by, deleted_at) VALUES (?, ?, ?, ?, ?, ?)').run(`Trash/t${i}`, `Sp/t${i}`, awkward(rng), 'Document', awkward(rng), awkward(rng))
        db.prepare(
          'INSERT INTO contextual_events (consumer_id, event_id, version, path, node_type, kind, state, attempt, lease_token, expires_at, available_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        ).run('c', `e${i}`, i, `Sp/n${i}`, 'Document', 'Created', 'dead', 1, null, 0, 0, rng.next() < 0.3 ? null : awkward(rng, 20))
      }
    } finally {
      db.close()
    }
    const file = join(dir, 'awkward.weftbak')
    await takeBackup({ dataDir: dir }, file)
    const target = await database()
    await expect(restoreBackup(file, { databaseUrl: target })).resolves.toMatchObject({ mode: 'fresh', nodes: 300 })
    const source = await dumpTables({ dataDir: dir })
    expect(source.accounts).toHaveLength(40)
    expect(await dumpTables({ databaseUrl: target }), `seed ${seed}`).toEqual(source)
    const copyDir = await makeTempDir('weft-backup-copy2-')
    dirs.push(copyDir)
    await restoreBackup(file, { dataDir: copyDir })
    expect(await dumpTables({ dataDir: copyDir }), `seed ${seed}`).toEqual(source)
  })

  it('[BAK3] an insert the database refuses midway (its writes pipelined): the restore fails with that cause and writes nothing', { timeout: 300_000 }, async () => {
    const source = await database()
    const s = await openPostgresStorage({ connectionString: source })
    await seedNodes(s, 'Sp', 2500, 20)
    await s.close()
    const dir = await makeTempDir('weft-backup-pg-')
    dirs.push(dir)
    const file = join(dir, 'b.weftbak')
    await takeBackup({ databaseUrl: source }, file)
    const target = await database()
    // The schema first (as a server would make it), then a trigger refusing one node of the
    // middle of the file: statements sent after that insert only echo the abort.
    await (await openPostgresStorage({ connectionString: target })).close()
    const before = await dumpTables({ databaseUrl: target })
    const c = new pg.Client({ connectionString: target })
    await c.connect()
    await c.query(`CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.path = 'Sp/n1500' THEN RAISE EXCEPTION 'refused by the disk'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_one BEFORE INSERT ON nodes FOR EACH ROW EXECUTE FUNCTION refuse_one();`)
    await c.end()
    const error = await restoreBackup(file, { databaseUrl: target }).catch((e: unknown) => e)
    expect(String(error)).toMatch(/refused by the disk/)
    expect(await dumpTables({ databaseUrl: target })).toEqual(before)
    // Without the trigger the same file restores whole.
    const c2 = new pg.Client({ connectionString: target })
    await c2.connect()
    await c2.query('DROP TRIGGER refuse_one ON nodes')
    await c2.end()
    await expect(restoreBackup(file, { databaseUrl: target })).resolves.toMatchObject({ mode: 'fresh', nodes: 2500 })
  })

  it('[BAK1] [BAK2] [BAK3] [BAK5] [BAK6] backup while writing, restore into a fresh database (identical) and over the old history (forward, old evidence refused)', { timeout: 900_000 }, async () => {
    const url = await database()
    const dir = await makeTempDir('weft-backup-pg-')
    dirs.push(dir)
    const ts = await startTestServer({ config: { databaseUrl: url } })
    try {
      const owner = await signup(ts.url)
      const space = await createSpace(ts.url, owner.token)
      const a = api(ts.url, owner.token)
      const sub = `${space}/s`
      expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/in`)), 201)
      expectStatus(await a.putNode(`${space}/in`, 'Document', {}), 201)
      const c = ctx(ts.url, owner.token)
      expectStatus(await c.next(sub), 200)
      expectStatus(await a.putNode(`${space}/in/one`, 'Document', { T: 1 }), 201)
      const held = await pull(ts.url, owner.token, sub)
      const before = (await metaOf({ databaseUrl: url }))!

      const writer = await startCounterWriter(ts.url, owner.token, space)
      await waitFor(() => writer.written() >= 10, 60_000)
      const live = join(dir, 'live.weftbak')
      const b = await runWeft(['backup', live], { DATABASE_URL: url })
      const after = writer.written()
      await waitFor(() => writer.written() >= after + 3, 60_000)
      await writer.stop()
      expect(b.code, b.stderr).toBe(0)
      expect(JSON.parse(b.stdout)).toMatchObject({ backend: 'postgres', databaseId: before.databaseId, incarnation: before.incarnation })

      // [BAK6] Refused while the server holds the database; nothing changed.
      const dump = await dumpTables({ databaseUrl: url })
      const busy = await runWeft(['restore', live], { DATABASE_URL: url })
      expect(busy.code).toBe(4)
      expect(await dumpTables({ databaseUrl: url })).toEqual(dump)

      // Into a fresh database: one consistent commit (counter N = k ⇒ w0..wk, at most w{k+1}).
      const copyUrl = await database()
      const r1 = await runWeft(['restore', live], { DATABASE_URL: copyUrl })
      expect(r1.code, r1.stderr).toBe(0)
      expect(JSON.parse(r1.stdout)).toMatchObject({ mode: 'fresh' })
      const copy = await startTestServer({ config: { databaseUrl: copyUrl } })
      try {
        expect(await checkCounterSnapshot(copy.url, owner.token, space)).toBeGreaterThanOrEqual(9)
      } finally {
        await copy.cleanup()
      }

      // Stopped: backup → fresh database, and → a SQLite DATA_DIR (cross-backend): every table identical.
      await ts.server.close()
      const still = join(dir, 'still.weftbak')
      expect((await runWeft(['backup', still], { DATABASE_URL: url })).code).toBe(0)
      const sameUrl = await database()
      expect((await runWeft(['restore', still], { DATABASE_URL: sameUrl })).code).toBe(0)
      const source = withoutLeases(await dumpTables({ databaseUrl: url }))
      expect(await dumpTables({ databaseUrl: sameUrl })).toEqual(source)
      const sqliteDir = await makeTempDir('weft-backup-pg2sqlite-')
      dirs.push(sqliteDir)
      const cross = await runWeft(['restore', still], { DATA_DIR: sqliteDir })
      expect(cross.code, cross.stderr).toBe(0)
      expect(await dumpTables({ dataDir: sqliteDir })).toEqual(source)

      // Over the old history: forward, incarnation bumped, the lease and token from before refused.
      const r2 = await runWeft(['restore', live], { DATABASE_URL: url })
      expect(r2.code, r2.stderr).toBe(0)
      expect(JSON.parse(r2.stdout)).toMatchObject({ mode: 'forward', incarnation: before.incarnation + 1, databaseId: before.databaseId })
      await ts.restart()
      const c2 = ctx(ts.url, owner.token)
      const ack = await c2.ack(held.consumerId, held.item)
      expect([ack.status, errorCode(ack)]).toEqual([409, 'stale_lease'])
      const react = await c2.react(held.item, 'reply', { Text: 'stale' })
      expect([react.status, errorCode(react)]).toEqual([403, 'reaction_denied'])
      const again = await pull(ts.url, owner.token, sub)
      expect([again.item.event.path, again.item.attempt, again.item.incarnation]).toEqual([`${space}/in/one`, held.item.attempt + 1, before.incarnation + 1])
      // Versions went forward: the counter as the backup had it, at a version above every one handed out before.
      const counter = (await api(ts.url, owner.token).getNode(`${space}/counter`)).body as unknown as { version: number; content: { N: number } }
      expect(counter.content.N).toBeLessThan(writer.written() - 1)
      expect(counter.version).toBeGreaterThan(Math.max(...dump.changes!.map((r) => Number(r[0]))))
    } finally {
      await ts.cleanup()
    }
  })
})
