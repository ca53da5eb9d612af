import { randomBytes, randomUUID } from 'node:crypto'
import { mkdir, open } from 'node:fs/promises'
import * as Y from 'yjs'
import { WeftError, docToJson, isInTrash, replaceDocContentForward, textPolicyFor, type JsonObject, type NodePath } from '../../shared/index.js'
import { SERVER_DOC_CLIENT } from '../admission/index.js'
import { canonicalTombstone as canonical, holdPostgresExclusive, holdSqliteExclusive, mergeTombstones, openPostgresStorage, openSqliteStorage, replayLog, tombstoneOfLog, type HolderLock } from '../storage/index.js'
import type { Progress } from './backup.js'
import { describeLocation, postgresExec, sqliteExec, sqliteFile, type Exec, type Location } from './exec.js'
import { InvalidBackup, readBody, readHeader as readHeaderOf, verifyBackup, type BackupHeader, type NodeRecord } from './format.js'
import { NODE_CLIENTS, NODE_UPDATES, NODES, PLAIN_TABLES, insertParams, insertSql, q, rowChars, rowToPortable, selectList, type PortableRow, type TableSpec } from './tables.js'

const TOMBSTONES = PLAIN_TABLES.find((t) => t.name === 'node_tombstones')!

/** [OPS11] Something holds the database (a running server): WeftError `database_in_use` (exit code 4). */
export class DatabaseInUse extends WeftError {
  constructor(message: string) {
    super('database_in_use', message)
    this.name = 'DatabaseInUse'
  }
}

export interface RestoreResult {
  header: BackupHeader
  /** `fresh`: the target had no history, rows went in as written; `forward`: see restoreBackup. */
  mode: 'fresh' | 'forward'
  nodes: number
  /** Nodes written as a new change on top of the target's (forward mode). */
  forwarded: number
  /** Nodes the target had that the backup has not (deleted, forward mode). */
  deleted: number
  incarnation: number
  databaseId: string
  headVersion: number
}

const BATCH = 200
/**
 * Whatever its count, a batch is written once it holds about this many characters: a file of
 * big nodes (a snapshot of megabytes each) never gathers 200 of them in memory at once.
 */
const BATCH_CHARS = 16 << 20
const NODE_COLUMNS = NODES.columns.map(([c]) => c)
const col = (name: string) => NODE_COLUMNS.indexOf(name)
const C = { path: col('path'), nodeType: col('node_type'), content: col('content'), version: col('version'), snapshot: col('snapshot'), updateCount: col('update_count'), stale: col('content_stale') }

interface Existing {
  row: PortableRow
  updates: [number, string | null][]
  clients: [number, string][]
}

/** Creates the schema (as the server would) so a fresh DATA_DIR or database can be restored into. */
async function ensureSchema(at: Location): Promise<void> {
  const storage = 'dataDir' in at ? openSqliteStorage({ file: sqliteFile(at.dataDir), writer: 'inline' }) : await openPostgresStorage({ connectionString: at.databaseUrl, schema: at.schema })
  await storage.close()
}

async function holdExclusive(at: Location): Promise<HolderLock> {
  const lock = 'dataDir' in at ? holdSqliteExclusive(sqliteFile(at.dataDir)) : await holdPostgresExclusive(at.databaseUrl, at.schema)
  if (!lock) throw new DatabaseInUse(`${describeLocation(at)} is open in a running server (or another restore): stop every server on it, then restore.`)
  return lock
}

const sameRow = (a: PortableRow, b: PortableRow) => a.length === b.length && a.every((v, i) => v === b[i])
const sameLog = (a: Existing['updates'], b: NodeRecord['updates']) => a.length === b.length && a.every((u, i) => u[0] === b[i]![0] && u[1] === b[i]![1])

function docOf(snapshot: string | null, updates: readonly [number, string | null][]): Y.Doc {
  const doc = new Y.Doc()
  const log = updates.flatMap(([, u]) => (u ? [Buffer.from(u, 'base64')] : []))
  replayLog(doc, snapshot ? Buffer.from(snapshot, 'base64') : null, log)
  return doc
}

/** What the backup says a node holds: its row's content, or its log's when the row lagged it ([STO5]). */
function contentOf(n: NodeRecord): JsonObject {
  if (n.row[C.stale] !== 1) return JSON.parse(String(n.row[C.content])) as JsonObject
  const doc = docOf(n.row[C.snapshot] as string | null, n.updates)
  try {
    return docToJson(doc)
  } finally {
    doc.destroy()
  }
}

/**
 * [BAK4] The node written forward: the target's own Yjs log, plus ONE system transaction that
 * makes its content the backup's, under a fresh client id bound to the server. Every struct a
 * client synced before the restore is in this log already, so a client that reconnects with its
 * older copy adds nothing the restore took away: Yjs sees only its unsynced edits as new.
 */
function forwardNode(n: NodeRecord, before: Existing | Uint8Array, version: number): { row: PortableRow; serverClient: number } {
  // [TOMB1] Or over the tombstone the node left when it was deleted from the target: the same
  // forward transaction, over every struct a client may still hold of it.
  const doc = before instanceof Uint8Array ? new Y.Doc() : docOf(before.row[C.snapshot] as string | null, before.updates)
  if (before instanceof Uint8Array) Y.applyUpdate(doc, before)
  try {
    const bound = new Set(before instanceof Uint8Array ? [] : before.clients.map(([c]) => c))
    for (const [c] of n.clients) bound.add(c)
    replaceDocContentForward(doc, contentOf(n), textPolicyFor(String(n.row[C.nodeType])), bound)
    const row = [...n.row]
    row[C.content] = JSON.stringify(docToJson(doc))
    row[C.snapshot] = Buffer.from(Y.encodeStateAsUpdate(doc)).toString('base64')
    row[C.updateCount] = 0
    row[C.stale] = 0
    row[C.version] = version
    return { row, serverClient: doc.clientID }
  } finally {
    doc.destroy()
  }
}

class Applier {
  private readonly plainSeen = new Set<string>()
  private nextVersion: number
  readonly paths = new Set<string>()
  forwarded = 0
  private nodeBatch: NodeRecord[] = []
  private nodeChars = 0
  private readonly rowBatches = new Map<TableSpec, PortableRow[]>()
  private readonly rowBatchChars = new Map<TableSpec, number>()
  /**
   * [TOMB1] Forward mode: the target's tombstones (read before its tables are replaced), and
   * those of the nodes this restore deletes; merged into the file's at the end.
   */
  private readonly tombstones: Map<string, Uint8Array>

  constructor(
    private readonly x: Exec,
    readonly mode: 'fresh' | 'forward',
    head: number,
    targetTombstones = new Map<string, Uint8Array>(),
  ) {
    this.tombstones = targetTombstones
    this.nextVersion = head + 1
  }

  get lastVersion(): number {
    return this.nextVersion - 1
  }

  async row(t: TableSpec, r: PortableRow): Promise<void> {
    if (t === TOMBSTONES) r = canonicalTombstone(r)
    let batch = this.rowBatches.get(t)
    if (!batch) this.rowBatches.set(t, (batch = []))
    batch.push(r)
    const chars = (this.rowBatchChars.get(t) ?? 0) + rowChars(r)
    this.rowBatchChars.set(t, chars)
    if (batch.length >= BATCH || chars >= BATCH_CHARS) await this.flushRows(t)
  }

  private async flushRows(t: TableSpec): Promise<void> {
    const batch = this.rowBatches.get(t)
    if (!batch?.length) return
    this.rowBatches.set(t, [])
    this.rowBatchChars.set(t, 0)
    await this.insert(t, batch)
  }

  private async insert(t: TableSpec, rows: readonly PortableRow[], conflict = ''): Promise<void> {
    for (let i = 0; i < rows.length; i += BATCH) {
      const part = rows.slice(i, i + BATCH)
      await this.x.send(insertSql(t, part.length, this.x.dialect, conflict), insertParams(t, part, this.x.dialect))
    }
  }

  async node(n: NodeRecord): Promise<void> {
    this.paths.add(String(n.row[C.path]))
    this.nodeBatch.push(n)
    this.nodeChars += rowChars(n.row) + n.updates.reduce((sum, [, data]) => sum + (data?.length ?? 0), 0)
    if (this.nodeBatch.length >= BATCH || this.nodeChars >= BATCH_CHARS) await this.flushNodes()
  }

  async flush(): Promise<void> {
    for (const t of this.rowBatches.keys()) await this.flushRows(t)
    await this.flushNodes()
  }

  private async existing(paths: readonly string[]): Promise<Map<string, Existing>> {
    const out = new Map<string, Existing>()
    if (paths.length === 0) return out
    const list = paths.map(() => '?').join(', ')
    for (const r of await this.x.all(`SELECT ${selectList(NODES, this.x.dialect)} FROM nodes WHERE path IN (${list})`, paths)) {
      out.set(String(r.path), { row: rowToPortable(NODES, r), updates: [], clients: [] })
    }
    for (const r of await this.x.all(`SELECT path, seq, data FROM node_updates WHERE path IN (${list}) ORDER BY path, seq`, paths)) {
      out.get(String(r.path))?.updates.push(rowToPortable(NODE_UPDATES, r).slice(1) as [number, string | null])
    }
    for (const r of await this.x.all(`SELECT path, client, principal FROM node_clients WHERE path IN (${list})`, paths)) {
      out.get(String(r.path))?.clients.push([Number(r.client), String(r.principal)])
    }
    return out
  }

  private async flushNodes(): Promise<void> {
    const batch = this.nodeBatch
    if (batch.length === 0) return
    this.nodeBatch = []
    this.nodeChars = 0
    const rows: PortableRow[] = []
    const updates: PortableRow[] = []
    const clients: PortableRow[] = []
    const changes: PortableRow[] = []
    const replaced: string[] = []
    /** Paths whose log is written anew (a leftover log row must not collide). */
    const cleared: string[] = []
    const before = this.mode === 'forward' ? await this.existing(batch.map((n) => String(n.row[C.path]))) : new Map<string, Existing>()
    for (const n of batch) {
      const path = String(n.row[C.path])
      const was = before.get(path)
      const logOf = (u: NodeRecord['updates']) => u.map(([seq, data]) => [path, seq, data] as PortableRow)
      const clientsOf = (c: NodeRecord['clients']) => c.map(([client, principal]) => [path, client, principal] as PortableRow)
      if (this.mode === 'fresh') {
        rows.push(n.row)
        updates.push(...logOf(n.updates))
        clients.push(...clientsOf(n.clients))
        continue
      }
      if (was && sameRow(was.row, n.row) && sameLog(was.updates, n.updates)) {
        // Unchanged since the backup: the target's row stays; bindings are the union.
        clients.push(...clientsOf(n.clients))
        continue
      }
      const version = this.nextVersion++
      this.forwarded++
      const left = was ? undefined : this.tombstones.get(path)
      if (left) {
        // Deleted from the target after the backup: it comes back over its tombstone ([TOMB1]).
        this.tombstones.delete(path)
        const fwd = forwardNode(n, left, version)
        cleared.push(path)
        rows.push(fwd.row)
        clients.push([path, fwd.serverClient, SERVER_DOC_CLIENT])
        changes.push([version, path, n.row[C.nodeType]!, 'Created', null])
        continue
      }
      if (!was) {
        // Not in the target (another history): it comes back as a new change.
        const row = [...n.row]
        row[C.version] = version
        rows.push(row)
        updates.push(...logOf(n.updates))
        clients.push(...clientsOf(n.clients))
        changes.push([version, path, n.row[C.nodeType]!, 'Created', null])
        cleared.push(path)
        continue
      }
      const fwd = forwardNode(n, was, version)
      replaced.push(path)
      cleared.push(path)
      rows.push(fwd.row)
      clients.push(...clientsOf(was.clients), ...clientsOf(n.clients), [path, fwd.serverClient, SERVER_DOC_CLIENT])
      changes.push([version, path, n.row[C.nodeType]!, 'Updated', null])
    }
    if (cleared.length) await this.x.send(`DELETE FROM node_updates WHERE path IN (${cleared.map(() => '?').join(', ')})`, cleared)
    if (replaced.length) await this.x.send(`DELETE FROM nodes WHERE path IN (${replaced.map(() => '?').join(', ')})`, replaced)
    const conflict = ' ON CONFLICT DO NOTHING'
    await this.insert(NODES, rows)
    await this.insert(NODE_UPDATES, updates)
    await this.insert(NODE_CLIENTS, clients, conflict)
    await this.insert(CHANGES, changes)
  }

  /** Forward mode: the target's nodes the backup does not have are deleted, each a new Deleted change. */
  async deleteOthers(): Promise<number> {
    const gone = (await this.x.all('SELECT path, node_type FROM nodes ORDER BY path')).filter((r) => !this.paths.has(String(r.path)))
    for (let i = 0; i < gone.length; i += BATCH) {
      const part = gone.slice(i, i + BATCH)
      const paths = part.map((r) => String(r.path))
      const list = paths.map(() => '?').join(', ')
      await this.leaveTombstones(paths, list)
      for (const t of ['node_updates', 'node_clients', 'nodes']) await this.x.run(`DELETE FROM ${t} WHERE path IN (${list})`, paths)
      await this.insert(CHANGES, part.map((r) => [this.nextVersion++, String(r.path), String(r.node_type), 'Deleted']))
    }
    return gone.length
  }

  /** [TOMB1] What the target's nodes this restore deletes leave at their paths (from their logs). */
  private async leaveTombstones(paths: readonly string[], list: string): Promise<void> {
    const logs = new Map<string, { snapshot: Uint8Array | null; updates: Uint8Array[] }>()
    for (const r of await this.x.all(`SELECT path, snapshot FROM nodes WHERE path IN (${list})`, paths)) {
      logs.set(String(r.path), { snapshot: r.snapshot ? new Uint8Array(r.snapshot as Buffer) : null, updates: [] })
    }
    for (const r of await this.x.all(`SELECT path, data FROM node_updates WHERE path IN (${list}) ORDER BY path, seq`, paths)) {
      if (r.data) logs.get(String(r.path))?.updates.push(new Uint8Array(r.data as Buffer))
    }
    for (const [path, log] of logs) {
      // A trash entry's path is never used again: it leaves nothing.
      if (isInTrash(path as NodePath)) continue
      const state = tombstoneOfLog(log.snapshot, log.updates)
      if (state) this.tombstones.set(path, mergeTombstones(this.tombstones.get(path) ?? null, state)!)
    }
  }

  /**
   * [TOMB1] Forward mode, last: the target's tombstones no node took, and those of the nodes
   * deleted, merged with the file's; a path that holds a node keeps none.
   */
  async mergeTombstones(at: string): Promise<void> {
    const left = [...this.tombstones]
    for (let i = 0; i < left.length; i += BATCH) {
      const part = left.slice(i, i + BATCH)
      const paths = part.map(([p]) => p)
      const list = paths.map(() => '?').join(', ')
      const inFile = new Map((await this.x.all(`SELECT path, state FROM node_tombstones WHERE path IN (${list})`, paths)).map((r) => [String(r.path), new Uint8Array(r.state as Buffer)]))
      await this.x.run(`DELETE FROM node_tombstones WHERE path IN (${list})`, paths)
      await this.insert(
        TOMBSTONES,
        part.map(([path, state]) => [path, Buffer.from(mergeTombstones(inFile.get(path) ?? null, state)!).toString('base64'), at]),
      )
    }
  }
}

/** A tombstone from a file, written as this server would (whatever content the bytes held is deleted); an unreadable one is refused. */
function canonicalTombstone(r: PortableRow): PortableRow {
  let state: Uint8Array | null
  try {
    state = canonical(Buffer.from(String(r[1]), 'base64'))
  } catch {
    throw new InvalidBackup(`the tombstone of ${String(r[0])} is not a whole Yjs update.`)
  }
  if (!state) throw new InvalidBackup(`the tombstone of ${String(r[0])} covers nothing.`)
  return [r[0]!, Buffer.from(state).toString('base64'), r[2]!]
}

const CHANGES = PLAIN_TABLES.find((t) => t.name === 'changes')!

async function targetHead(x: Exec): Promise<number> {
  const fromChanges = Number((await x.all('SELECT coalesce(max(version), 0) AS v FROM changes'))[0]?.v ?? 0)
  const counter =
    x.dialect === 'sqlite'
      ? (await x.all("SELECT seq AS v FROM sqlite_sequence WHERE name = 'changes'"))[0]?.v
      : (await x.all('SELECT value AS v FROM version_counter WHERE id = 1'))[0]?.v
  return Math.max(fromChanges, Number(counter ?? 0))
}

async function setHead(x: Exec, head: number): Promise<void> {
  if (x.dialect === 'postgres') {
    await x.run('UPDATE version_counter SET value = ? WHERE id = 1', [head])
    return
  }
  // AUTOINCREMENT never hands out a version at or below sqlite_sequence's.
  const n = await x.run("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'changes'", [head])
  if (n === 0) await x.run("INSERT INTO sqlite_sequence (name, seq) VALUES ('changes', ?)", [head])
}

/**
 * [BAK3] [BAK4] [BAK5] `weft restore`:
 *
 *  1. refuses while anything holds the database (a server: [BAK6]);
 *  2. verifies the whole file (header, every record's shape, length, checksum, counts) before
 *     touching anything;
 *  3. applies it in ONE transaction: a crash or `kill -9` anywhere leaves the database as it was;
 *  4. bumps the history incarnation (max of the file's and the target's, plus one) and makes a
 *     new seal key, so no causation token sealed before the restore opens or matches; every
 *     lease held in the file is expired (its token cleared), so no lease evidence from before
 *     the restore fences anything; consumers keep the file's cursors and resume from them.
 *
 * Into a database with no history the rows go in as written (an identical copy). Into one with
 * history, the restore is a change on top of it ([BAK4]): versions continue from the target's
 * head, so nothing a client or consumer saw is handed out again; every node that differs
 * becomes one forward Yjs transaction over the target's own log (a new `Updated` change); a
 * node only the backup has comes back (`Created`); a node only the target has is deleted.
 */
export async function restoreBackup(file: string, to: Location, onProgress: Progress = () => undefined): Promise<RestoreResult> {
  if ('dataDir' in to) await mkdir(to.dataDir, { recursive: true })
  // Refused before anything else, and before the schema is created: a server may be running.
  const probe = await holdExclusive(to)
  await probe.release()
  const header = await verifyBackup(file, (n) => {
    if (n % 5000 === 0) onProgress('verify', n, -1)
  })
  onProgress('verified', 1, 1)
  await ensureSchema(to)
  const lock = await holdExclusive(to)
  const x = 'dataDir' in to ? sqliteExec(sqliteFile(to.dataDir), { mustExist: true }) : await postgresExec(to.databaseUrl, to.schema)
  const fh = await open(file, 'r')
  try {
    // The same file, read again inside the transaction: a file replaced since it was verified fails its checksum there.
    if ((await readHeaderOf(fh, file)).sha256 !== header.sha256) throw new InvalidBackup(`${file} changed while it was being verified.`)
    await x.run(x.dialect === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN')
    const head = await targetHead(x)
    const mode = head === 0 && Number((await x.all('SELECT count(*) AS n FROM nodes'))[0]?.n ?? 0) === 0 ? 'fresh' : 'forward'
    const meta = (await x.all('SELECT database_id, incarnation FROM contextual_meta WHERE id = 1'))[0]
    // [TOMB1] The target's tombstones outlive the table's replacement (forward mode).
    const targetTombstones = new Map<string, Uint8Array>()
    if (mode === 'forward') for (const r of await x.all('SELECT path, state FROM node_tombstones')) targetTombstones.set(String(r.path), new Uint8Array(r.state as Buffer))
    for (const t of PLAIN_TABLES) await x.run(`DELETE FROM ${q(t.name)}`)
    if (mode === 'fresh') for (const t of ['node_updates', 'node_clients', 'nodes']) await x.run(`DELETE FROM ${t}`)
    const applier = new Applier(x, mode, Math.max(head, header.headVersion), targetTombstones)
    const total = header.counts.nodes ?? 0
    let nodes = 0
    for await (const rec of readBody(fh, header)) {
      if (rec.t === 'row') {
        await applier.row(rec.table, rec.row)
        continue
      }
      await applier.node(rec.node)
      if (++nodes % 1000 === 0 || nodes === total) onProgress('nodes', nodes, total)
    }
    await applier.flush()
    await x.settle()
    const deleted = mode === 'forward' ? await applier.deleteOthers() : 0
    if (mode === 'forward') await applier.mergeTombstones(new Date().toISOString())
    // [TOMB1] A path that holds a node holds no tombstone (its node took it, or a file said otherwise).
    await x.run('DELETE FROM node_tombstones WHERE path IN (SELECT path FROM nodes)')
    const newHead = mode === 'fresh' ? header.headVersion : applier.lastVersion
    await setHead(x, newHead)
    // [BAK5] Lease evidence from before the restore fences nothing: every lease is expired and its token cleared.
    await x.run(`UPDATE contextual_events SET lease_token = NULL, expires_at = 0 WHERE state = 'leased'`)
    const incarnation = Math.max(header.incarnation, meta ? Number(meta.incarnation) : 0) + 1
    const databaseId = header.databaseId ?? (meta ? String(meta.database_id) : randomUUID())
    await x.run('DELETE FROM contextual_meta')
    await x.run('INSERT INTO contextual_meta (id, database_id, incarnation, seal_key) VALUES (1, ?, ?, ?)', [databaseId, incarnation, randomBytes(32).toString('base64')])
    if (x.dialect === 'postgres' && (await x.all("SELECT 1 AS ok FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'engine_leases'")).length) {
      // Engine ownership starts over; fences only rise, so a holder from before stays fenced out.
      await x.run('UPDATE engine_leases SET holder = NULL, expires_at = now()')
    }
    await x.settle()
    await x.run('COMMIT')
    return { header, mode, nodes, forwarded: applier.forwarded, deleted, incarnation, databaseId, headVersion: newHead }
  } catch (error) {
    await x.run('ROLLBACK').catch(() => undefined)
    throw error
  } finally {
    await fh.close()
    await x.close()
    await lock.release()
  }
}
