import { copyFile, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { restoreBackup, takeBackup, verifyBackup, DatabaseInUse, HEADER_BYTES, InvalidBackup } from '../../sync-server/backup/index.js'
import { openSqliteStorage, type FeedWithhold } from '../../sync-server/storage/index.js'
import type { NodePath } from '../../shared/index.js'
import {
  api,
  createSpace,
  errorCode,
  expectStatus,
  login,
  makeTempDir,
  removeDir,
  signup,
  startTestServer,
  stockProvider,
  waitFor,
} from '../helpers/index.js'
import { backupLines, checkCounterSnapshot, dumpTables, metaOf, rewriteBackupRecord, runWeft, seedNodes, startCounterWriter, withoutLeases, type BackupRecord } from '../helpers/backup-fixtures.js'
import { ctx, definition, pull, putSubscription } from './contextual-helpers.js'

const dirs: string[] = []
async function tempDir(): Promise<string> {
  const d = await makeTempDir('weft-backup-')
  dirs.push(d)
  return d
}
afterAll(async () => {
  for (const d of dirs) await removeDir(d)
})

describe('weft backup / weft restore on SQLite (issue 20 item 3, issue 19 item 6)', () => {
  it('[BAK1] [BAK3] a backup taken while the server writes is one consistent commit, and restores to an identical copy', { timeout: 480_000 }, async () => {
    const ts = await startTestServer({ dataDir: await tempDir() })
    const out = await tempDir()
    try {
      const alice = await signup(ts.url)
      const space = await createSpace(ts.url, alice.token)
      const writer = await startCounterWriter(ts.url, alice.token, space)
      await waitFor(() => writer.written() >= 20, 60_000)
      const file = join(out, 'live.weftbak')
      const run = await runWeft(['backup', file], { DATA_DIR: ts.dataDir })
      const afterBackup = writer.written()
      await waitFor(() => writer.written() >= afterBackup + 5, 60_000)
      await writer.stop()
      expect(run.code, run.stderr).toBe(0)
      expect(run.stderr).toMatch(/backup: nodes \d+\/\d+/)
      const header = JSON.parse(run.stdout) as { counts: Record<string, number>; headVersion: number }

      // Restore into a fresh DATA_DIR and read it through a server.
      const copyDir = await tempDir()
      const restored = await runWeft(['restore', file], { DATA_DIR: copyDir })
      expect(restored.code, restored.stderr).toBe(0)
      expect(JSON.parse(restored.stdout)).toMatchObject({ mode: 'fresh', nodes: header.counts.nodes, headVersion: header.headVersion })
      const copy = await startTestServer({ dataDir: copyDir })
      try {
        const c = api(copy.url, alice.token)
        expect(await checkCounterSnapshot(copy.url, alice.token, space)).toBeGreaterThanOrEqual(19)
        // The change log ends at the head; every node's version is its last change's.
        const changes = (await c.changesSince(0)).body.items as { version: number; path: string }[]
        expect(Math.max(...changes.map((x) => x.version))).toBeLessThanOrEqual(header.headVersion)
        const counterNode = (await c.getNode(`${space}/counter`)).body as { version: number }
        expect(changes.filter((x) => x.path === `${space}/counter`).at(-1)?.version).toBe(counterNode.version)
        // Access and accounts came along: alice logs in on the copy and is still Admin of the space.
        await login(copy.url, alice.email, alice.password)
        expectStatus(await c.putNode(`${space}/after-restore`, 'Document', {}), 201)
      } finally {
        await copy.cleanup()
      }

      // With the server stopped: backup → restore elsewhere → every table identical.
      await ts.server.close()
      const still = join(out, 'still.weftbak')
      expect((await runWeft(['backup', still], { DATA_DIR: ts.dataDir })).code).toBe(0)
      const again = await tempDir()
      expect((await runWeft(['restore', still], { DATA_DIR: again })).code).toBe(0)
      expect(await dumpTables({ dataDir: again })).toEqual(withoutLeases(await dumpTables({ dataDir: ts.dataDir })))
    } finally {
      await ts.cleanup()
    }
  })

  it('[BAK5] after a restore the incarnation is bumped: old lease and causation evidence is refused; the consumer resumes from the restored checkpoint', { timeout: 300_000 }, async () => {
    const ts = await startTestServer({ dataDir: await tempDir() })
    const file = join(await tempDir(), 'ctx.weftbak')
    try {
      const owner = await signup(ts.url)
      const space = await createSpace(ts.url, owner.token)
      const sub = `${space}/s`
      expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/in`)), 201)
      const a = api(ts.url, owner.token)
      expectStatus(await a.putNode(`${space}/in`, 'Document', {}), 201)
      const c = ctx(ts.url, owner.token)
      // The first pull makes the consumer; it sees what is committed after.
      expectStatus(await c.next(sub), 200)
      expectStatus(await a.putNode(`${space}/in/one`, 'Document', {}), 201)
      const held = await pull(ts.url, owner.token, sub)
      expect(held.item.event.path).toBe(`${space}/in/one`)
      const before = (await metaOf({ dataDir: ts.dataDir }))!
      expect(held.item.incarnation).toBe(before.incarnation)

      // The backup holds the lease; then the old history moves on: the item is acked, another event comes.
      expect((await runWeft(['backup', file], { DATA_DIR: ts.dataDir })).code).toBe(0)
      expectStatus(await a.putNode(`${space}/in/two`, 'Document', {}), 201)

      // [BAK6] A running server holds the database: refused, nothing changed (exit 4).
      const dump = await dumpTables({ dataDir: ts.dataDir })
      const busy = await runWeft(['restore', file], { DATA_DIR: ts.dataDir })
      expect(busy.code).toBe(4)
      expect(busy.stderr).toMatch(/running server/)
      expect(await dumpTables({ dataDir: ts.dataDir })).toEqual(dump)

      await ts.server.close()
      const r = await runWeft(['restore', file], { DATA_DIR: ts.dataDir })
      expect(r.code, r.stderr).toBe(0)
      expect(JSON.parse(r.stdout)).toMatchObject({ mode: 'forward', incarnation: before.incarnation + 1, databaseId: before.databaseId })
      const after = (await metaOf({ dataDir: ts.dataDir }))!
      expect(after.sealKey).not.toBe(before.sealKey)
      await ts.restart()

      const c2 = ctx(ts.url, owner.token)
      // The lease from before the restore fences nothing, and its causation token opens nowhere.
      const ack = await c2.ack(held.consumerId, held.item)
      expect([ack.status, errorCode(ack)]).toEqual([409, 'stale_lease'])
      const ext = await c2.extend(held.consumerId, held.item)
      expect([ext.status, errorCode(ext)]).toEqual([409, 'stale_lease'])
      const react = await c2.react(held.item, 'reply', { Text: 'from before' })
      expect([react.status, errorCode(react)]).toEqual([403, 'reaction_denied'])
      expect((await api(ts.url, owner.token).getNode(`${space}/in/one/reply`)).status).toBe(404)
      // The consumer resumes from the restored checkpoint: the leased event again, next attempt, new incarnation.
      const again = await pull(ts.url, owner.token, sub)
      expect(again.consumerId).toBe(held.consumerId)
      expect(again.item.event.path).toBe(`${space}/in/one`)
      expect(again.item.attempt).toBe(held.item.attempt + 1)
      expect(again.item.incarnation).toBe(before.incarnation + 1)
      expect(again.item.databaseId).toBe(before.databaseId)
      const ok = expectStatus(await c2.react(again.item, 'reply', { Text: 'after' }), 200).body
      expect(ok.outcome).toMatchObject({ status: 'committed' })
      expectStatus(await c2.ack(again.consumerId, again.item), 200)
      // `two` was written after the backup: the restore deleted it, as a new change the consumer sees.
      expect((await api(ts.url, owner.token).getNode(`${space}/in/two`)).status).toBe(404)
    } finally {
      await ts.cleanup()
    }
  })

  it('[BAK4] a restore reaches a stock y-websocket client that held newer state as forward updates; its resync does not revert it', { timeout: 300_000 }, async () => {
    const ts = await startTestServer({ dataDir: await tempDir() })
    const file = join(await tempDir(), 'fwd.weftbak')
    try {
      const alice = await signup(ts.url)
      const space = await createSpace(ts.url, alice.token)
      const path = `${space}/doc`
      expectStatus(await api(ts.url, alice.token).putNode(path, 'Document', { Title: 'restored', Tags: ['a'] }), 201)
      const held = new Y.Doc()
      const p1 = stockProvider(ts.url, path, alice.token, held)
      await p1.synced()
      expect((await runWeft(['backup', file], { DATA_DIR: ts.dataDir })).code).toBe(0)
      // After the backup the client edits; the server has it all.
      p1.content.set('Title', 'newer')
      p1.content.set('After', 1)
      await waitFor(async () => ((await api(ts.url, alice.token).getNode(path)).body.content as { After?: number }).After === 1)
      const versionBefore = (await api(ts.url, alice.token).getNode(path)).body.version as number
      p1.destroy()
      await ts.server.close()
      expect((await runWeft(['restore', file], { DATA_DIR: ts.dataDir })).code).toBe(0)
      await ts.restart()
      // The same Y.Doc (newer than the restored node) reconnects with a stock provider.
      const p2 = stockProvider(ts.url, path, alice.token, held)
      await p2.synced()
      await waitFor(() => p2.json().Title === 'restored' && !('After' in p2.json()), 30_000)
      expect(p2.json()).toEqual({ Title: 'restored', Tags: ['a'] })
      const node = (await api(ts.url, alice.token).getNode(path)).body as { content: unknown; version: number }
      expect(node.content).toEqual({ Title: 'restored', Tags: ['a'] })
      // Forward: a new version above everything handed out before the restore.
      expect(node.version).toBeGreaterThan(versionBefore)
      // A fresh client sees the same, and an edit after the restore still flows both ways.
      const other = stockProvider(ts.url, path, alice.token)
      await other.synced()
      expect(other.json()).toEqual({ Title: 'restored', Tags: ['a'] })
      p2.content.set('Later', true)
      await waitFor(() => other.json().Later === true)
      p2.destroy()
      other.destroy()
    } finally {
      await ts.cleanup()
    }
  })

  it('[BAK3] a damaged, truncated or foreign file is refused with a clear error, nothing changed (property: any mutation of the body)', { timeout: 400_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    await seedNodes(s, 'Sp', 60, 50)
    await s.close()
    const dir = await tempDir()
    const file = join(dir, 'good.weftbak')
    await takeBackup({ dataDir: source }, file)
    // The target: another database with its own data, which a refused restore must leave as it is.
    const target = await tempDir()
    const t = openSqliteStorage({ file: join(target, 'weft.db') })
    await seedNodes(t, 'Other', 5)
    await t.close()
    const before = await dumpTables({ dataDir: target })
    const good = await readFile(file)
    const bad = join(dir, 'bad.weftbak')

    // Examples through the CLI: exit 3 and a message naming what is wrong.
    const cases: [string, Buffer, RegExp][] = [
      ['truncated', good.subarray(0, good.length - 100), /truncated/],
      ['a flipped body byte', Buffer.concat([good.subarray(0, HEADER_BYTES + 10), Buffer.from([good[HEADER_BYTES + 10]! ^ 0x01]), good.subarray(HEADER_BYTES + 11)]), /checksum|not JSON|wrong shape|unknown table/],
      ['not a backup', Buffer.from('hello\n'), /not a Weft backup/],
      ['empty', Buffer.alloc(0), /not a Weft backup/],
      ['a newer format', Buffer.from(good.toString('latin1').replace(/"formatVersion":\d+/, '"formatVersion":9'), 'latin1'), /format version 9/],
      ['a count that lies', Buffer.from(good.toString('latin1').replace('"nodes":60', '"nodes":61'), 'latin1'), /nodes: 60 rows, the header says 61/],
    ]
    for (const [what, bytes, message] of cases) {
      await writeFile(bad, bytes)
      const r = await runWeft(['restore', bad], { DATA_DIR: target })
      expect([what, r.code]).toEqual([what, 3])
      expect(r.stderr, what).toMatch(/restore: refused, nothing changed: invalid_backup: /)
      expect(r.stderr, what).toMatch(message)
      // [OPS11] The code and message, never a stack.
      expect(r.stderr, what).not.toMatch(/\n\s+at /)
    }
    expect(await dumpTables({ dataDir: target })).toEqual(before)

    // Property: any change to the body's bytes, or any cut, is refused before the database is touched.
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record({ kind: fc.constant('flip' as const), at: fc.nat(good.length - HEADER_BYTES - 1), mask: fc.integer({ min: 1, max: 255 }) }),
          fc.record({ kind: fc.constant('cut' as const), at: fc.nat(good.length - 1), mask: fc.constant(0) }),
        ),
        async ({ kind, at, mask }) => {
          const bytes = Buffer.from(good)
          const mutated = kind === 'flip' ? (bytes[HEADER_BYTES + at]! ^= mask, bytes) : bytes.subarray(0, at)
          await writeFile(bad, mutated)
          await expect(restoreBackup(bad, { dataDir: target })).rejects.toSatisfy((e) => e instanceof InvalidBackup && e.code === 'invalid_backup' && e.httpStatus === 422)
        },
      ),
      { numRuns: 40, seed: 20_003 },
    )
    expect(await dumpTables({ dataDir: target })).toEqual(before)
    // The good file still verifies and restores.
    await copyFile(file, bad)
    await expect(verifyBackup(bad)).resolves.toMatchObject({ counts: { nodes: 60 } })
  })

  it('[OPS11] [BAK6] a restore into a database a storage holds is database_in_use (CLI exit 4, the code, no stack) and writes nothing', { timeout: 300_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    await seedNodes(s, 'Sp', 5)
    await s.close()
    const file = join(await tempDir(), 'good.weftbak')
    await takeBackup({ dataDir: source }, file)
    const target = await tempDir()
    const held = openSqliteStorage({ file: join(target, 'weft.db') })
    await seedNodes(held, 'Other', 3)
    const before = await dumpTables({ dataDir: target })
    try {
      const error = await restoreBackup(file, { dataDir: target }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(DatabaseInUse)
      expect(error).toMatchObject({ code: 'database_in_use', httpStatus: 409, message: expect.stringMatching(/stop every server on it, then restore/) })
      const r = await runWeft(['restore', file], { DATA_DIR: target })
      expect(r.code).toBe(4)
      expect(r.stderr).toMatch(/restore: refused, nothing changed: database_in_use: .*stop every server/)
      expect(r.stderr).not.toMatch(/\n\s+at /)
    } finally {
      await held.close()
    }
    expect(await dumpTables({ dataDir: target })).toEqual(before)
  })

  it('[CTX45] [BAK2] the count of swept acked events travels in a backup; a file from before it restores with 0', { timeout: 120_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    const consumer = { id: 'c1', defHash: 'h', operation: 'op', subscriptionPath: 'Sp/sub', params: '{}', name: 'w', owner: 'u1', limits: '{}', cursor: 0, createdAt: new Date(0).toISOString() }
    expect(await s.contextual({ op: 'ensureConsumer', consumer, most: 10 })).toMatchObject({ id: 'c1' })
    await s.close()
    const raw = new Database(join(source, 'weft.db'))
    raw.prepare('UPDATE contextual_consumers SET acked_pruned = 7').run()
    raw.close()
    const dir = await tempDir()
    const file = join(dir, 'swept.weftbak')
    await takeBackup({ dataDir: source }, file)
    const prunedIn = async (f: string) => {
      const target = await tempDir()
      await restoreBackup(f, { dataDir: target })
      const db = new Database(join(target, 'weft.db'), { readonly: true })
      try {
        return db.prepare('SELECT acked_pruned AS n FROM contextual_consumers').all()
      } finally {
        db.close()
      }
    }
    expect(await prunedIn(file)).toEqual([{ n: 7 }])
    // A file written before the column: its consumer rows are one value shorter.
    const good = await readFile(file)
    const at = backupLines(good).findIndex((l) => l.startsWith('{"t":"contextual_consumers"'))
    expect(at).toBeGreaterThanOrEqual(0)
    const older = await rewriteBackupRecord(good, at, (r) => void r.r.pop(), join(dir, 'older.weftbak'))
    expect(await prunedIn(older)).toEqual([{ n: 0 }])
    // Two values short is no file this weft ever wrote.
    const damaged = await rewriteBackupRecord(good, at, (r) => void r.r.splice(-2), join(dir, 'damaged.weftbak'))
    await expect(restoreBackup(damaged, { dataDir: await tempDir() })).rejects.toThrow(/wrong shape/)
  })

  it('[FEED5] [FEED8] [BAK2] whom a change record is withheld from, and where a Denied began, travel in a backup; a file from before them restores withheld from nobody, unmarked', { timeout: 120_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    const at = new Date(0).toISOString()
    const put = (path: string, withhold?: { scope: string; subject: string }[]) =>
      s.commit({ path: path as NodePath, kind: 'Created', nodeType: 'Document', name: path, content: {}, createdBy: 'u1', at, update: null, ...(withhold ? { withhold: withhold as FeedWithhold[] } : {}) })
    await put('Sp')
    await put('Sp/a')
    await put('Sp/a/b', [{ scope: 'Sp/a', subject: 'bob' }, { scope: 'Sp/a', subject: 'Sp/Team' }])
    await s.commit({ path: 'Sp/a/_Access/carol_Access' as NodePath, kind: 'Created', nodeType: 'Document', name: 'carol', content: {}, createdBy: 'u1', at, update: null, deniedFrom: 'carol' })
    await s.close()
    const dir = await tempDir()
    const file = join(dir, 'withheld.weftbak')
    await takeBackup({ dataDir: source }, file)
    const withheldIn = async (f: string) => {
      const target = await tempDir()
      await restoreBackup(f, { dataDir: target })
      const restored = openSqliteStorage({ file: join(target, 'weft.db') })
      let rows: unknown[]
      try {
        rows = (await restored.changesSince(0, 10)).map((r) => [r.path, r.withheld ?? null])
      } finally {
        await restored.close()
      }
      const db = new Database(join(target, 'weft.db'), { readonly: true })
      try {
        const marks = db.prepare('SELECT path, denied_from FROM changes WHERE denied_from IS NOT NULL ORDER BY version').all() as { path: string; denied_from: string }[]
        return { rows, marks: marks.map((m) => [m.path, m.denied_from]) }
      } finally {
        db.close()
      }
    }
    expect(await withheldIn(file)).toEqual({
      rows: [
        ['Sp', null],
        ['Sp/a', ['bob', 'Sp/Team']],
        ['Sp/a/b', ['bob', 'Sp/Team']],
        ['Sp/a/_Access/carol_Access', null],
      ],
      marks: [['Sp/a/_Access/carol_Access', 'carol']],
    })
    // Files written before the columns: change rows one value shorter (no marks), or two (nothing withheld either).
    const good = await readFile(file)
    const lines = backupLines(good)
    const shortened = async (values: number) => {
      let older = file
      for (let i = 0; i < lines.length; i++) {
        if (lines[i]!.startsWith('{"t":"changes"')) older = await rewriteBackupRecord(await readFile(older), i, (r) => void (r.r.length = values), join(dir, `older-${values}-${i}.weftbak`))
      }
      expect(older).not.toBe(file)
      return older
    }
    expect(await withheldIn(await shortened(5))).toEqual({
      rows: [
        ['Sp', null],
        ['Sp/a', ['bob', 'Sp/Team']],
        ['Sp/a/b', ['bob', 'Sp/Team']],
        ['Sp/a/_Access/carol_Access', null],
      ],
      marks: [],
    })
    expect(await withheldIn(await shortened(4))).toEqual({
      rows: [
        ['Sp', null],
        ['Sp/a', null],
        ['Sp/a/b', null],
        ['Sp/a/_Access/carol_Access', null],
      ],
      marks: [],
    })
  })

  it('[BAK3] a crafted file whose checksum is right is still refused when a record would break the server (bad path, content not an object, wrong types)', { timeout: 120_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    await seedNodes(s, 'Sp', 3, 10)
    await s.close()
    const dir = await tempDir()
    const file = join(dir, 'good.weftbak')
    await takeBackup({ dataDir: source }, file)
    const good = await readFile(file)
    const nodeAt = backupLines(good).findIndex((l) => l.startsWith('{"t":"node"'))
    const target = await tempDir()
    /** The file with one record rewritten and the header's length and checksum made right again. */
    const crafted = (edit: (rec: BackupRecord) => void) => rewriteBackupRecord(good, nodeAt, edit, join(dir, 'crafted.weftbak'))
    const refused = async (edit: (rec: BackupRecord) => void, message: RegExp) => {
      const error = await restoreBackup(await crafted(edit), { dataDir: target }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidBackup)
      expect((error as Error).message).toMatch(message)
    }
    await refused((r) => (r.r[0] = '../etc'), /is not a node path/)
    await refused((r) => (r.r[0] = 'a//b'), /is not a node path/)
    await refused((r) => (r.r[5] = '[1,2]'), /content is not a JSON object/)
    await refused((r) => (r.r[5] = '{"a":'), /content is not a JSON object/)
    await refused((r) => (r.r[9] = 'seven'), /wrong shape/)
    await refused((r) => (r.r[11] = 'not base64!'), /wrong shape/)
    await refused((r) => r.r.pop(), /wrong shape/)
    await refused((r) => (r.t = 'sqlite_master'), /unknown table/)
    // Unchanged, the same rewrite restores: the refusals above are the records', not the rewriting's.
    await expect(restoreBackup(await crafted(() => undefined), { dataDir: target })).resolves.toMatchObject({ mode: 'fresh', nodes: 3 })
  })

  it('[BAK5] kill -9 of a restore midway leaves the old state intact; the next restore completes', { timeout: 400_000 }, async () => {
    const source = await tempDir()
    const s = openSqliteStorage({ file: join(source, 'weft.db') })
    await seedNodes(s, 'Big', 6000, 400)
    await s.close()
    const file = join(await tempDir(), 'big.weftbak')
    await takeBackup({ dataDir: source }, file)
    const target = await tempDir()
    const t = openSqliteStorage({ file: join(target, 'weft.db') })
    await seedNodes(t, 'Old', 50)
    await t.close()
    const before = await dumpTables({ dataDir: target })
    // Killed once it has written the first nodes inside its transaction.
    const killed = await runWeft(['restore', file], { DATA_DIR: target }, /restore: nodes \d+\/6000\n/)
    expect(killed.signal).toBe('SIGKILL')
    expect(killed.stderr).not.toMatch(/restore: restored/)
    expect(await dumpTables({ dataDir: target })).toEqual(before)
    // The killed restore held nothing after its death: a server and a restore can open the database again.
    const done = await runWeft(['restore', file], { DATA_DIR: target })
    expect(done.code, done.stderr).toBe(0)
    const after = await dumpTables({ dataDir: target })
    expect(after.nodes!.filter((r) => String(r[0]).startsWith('Big/'))).toHaveLength(6000)
    expect(after.nodes!.filter((r) => String(r[0]).startsWith('Old/'))).toHaveLength(0)
  })
})
