import { BackupWriter, type BackupHeader, type NodeRecord } from './format.js'
import { describeLocation, existingTables, postgresExec, sqliteExec, sqliteFile, type Exec, type Location } from './exec.js'
import { NODE_CLIENTS, NODE_UPDATES, NODES, PLAIN_TABLES, q, rowToPortable, selectList, type TableSpec } from './tables.js'

export type Progress = (what: string, done: number, total: number) => void

/** Rows per keyset page: big enough to amortise a round trip, small enough to bound memory. */
const PAGE = 1000
const NODE_PAGE = 500

/** [BAK1] The snapshot's head: the highest version ever handed out (a purged or rolled-back one included). */
async function headVersion(x: Exec, tables: Set<string>): Promise<number> {
  const fromChanges = tables.has('changes') ? Number((await x.all('SELECT coalesce(max(version), 0) AS v FROM changes'))[0]?.v ?? 0) : 0
  if (x.dialect === 'sqlite') {
    const seq = tables.has('sqlite_sequence') ? (await x.all("SELECT seq FROM sqlite_sequence WHERE name = 'changes'"))[0]?.seq : undefined
    return Math.max(fromChanges, Number(seq ?? 0))
  }
  const counter = tables.has('version_counter') ? (await x.all('SELECT value FROM version_counter WHERE id = 1'))[0]?.value : undefined
  return Math.max(fromChanges, Number(counter ?? 0))
}

/**
 * Keyset pages of a table in key order. The next page is asked for before this one is handed on:
 * on PostgreSQL the database reads it while this one is encoded.
 */
async function* pages(x: Exec, t: TableSpec, size: number): AsyncGenerator<Record<string, unknown>[]> {
  const keys = t.key.map(q).join(', ')
  const read = (after: unknown[] | null) => {
    const where = after ? `WHERE (${keys}) > (${after.map(() => '?').join(', ')})` : ''
    const p = x.all(`SELECT ${selectList(t, x.dialect)} FROM ${q(t.name)} ${where} ORDER BY ${keys} LIMIT ${size}`, after ?? [])
    p.catch(() => undefined)
    return p
  }
  let next = read(null)
  for (;;) {
    const rows = await next
    if (rows.length === 0) return
    const last = rows[rows.length - 1]!
    if (rows.length === size) next = read(t.key.map((k) => last[k]))
    yield rows
    if (rows.length < size) return
  }
}

async function countOf(x: Exec, table: string): Promise<number> {
  return Number((await x.all(`SELECT count(*) AS n FROM ${q(table)}`))[0]?.n ?? 0)
}

/** Each node with its log and bindings: a page of nodes, then the logs and bindings of that page's path range. */
async function* nodeRecords(x: Exec, tables: Set<string>): AsyncGenerator<NodeRecord> {
  for await (const page of pages(x, NODES, NODE_PAGE)) {
    const first = String(page[0]!.path)
    const last = String(page[page.length - 1]!.path)
    const range = async (t: TableSpec, order: string) =>
      tables.has(t.name) ? await x.all(`SELECT ${selectList(t, x.dialect)} FROM ${q(t.name)} WHERE path >= ? AND path <= ? ORDER BY path, ${order}`, [first, last]) : []
    const byPath = <T>(rows: Record<string, unknown>[], f: (r: Record<string, unknown>) => T) => {
      const m = new Map<string, T[]>()
      for (const r of rows) {
        const p = String(r.path)
        let list = m.get(p)
        if (!list) m.set(p, (list = []))
        list.push(f(r))
      }
      return m
    }
    // Both asked at once (pipelined on PostgreSQL).
    const [logRows, clientRows] = await Promise.all([range(NODE_UPDATES, 'seq'), range(NODE_CLIENTS, 'client')])
    const updates = byPath(logRows, (r) => rowToPortable(NODE_UPDATES, r).slice(1) as [number, string | null])
    const clients = byPath(clientRows, (r) => rowToPortable(NODE_CLIENTS, r).slice(1) as [number, string])
    for (const r of page) {
      const path = String(r.path)
      yield { row: rowToPortable(NODES, r), updates: updates.get(path) ?? [], clients: clients.get(path) ?? [] }
    }
  }
}

export interface BackupResult {
  header: BackupHeader
  file: string
}

/**
 * [BAK1] `weft backup`: every table read inside ONE read transaction (SQLite: a deferred
 * transaction on a WAL database, whose snapshot is fixed by its first read while the server's
 * writer goes on; PostgreSQL: REPEATABLE READ READ ONLY, one snapshot for every statement), so
 * the file is the database at one commit: no node without its log, no change without its node.
 * The file appears only when complete (`<file>.partial`, synced, renamed).
 */
export async function takeBackup(from: Location, file: string, onProgress: Progress = () => undefined): Promise<BackupResult> {
  const x = 'dataDir' in from ? sqliteExec(sqliteFile(from.dataDir), { mustExist: true }) : await postgresExec(from.databaseUrl, from.schema)
  const writer = await BackupWriter.create(file).catch(async (error: unknown) => {
    await x.close()
    throw error
  })
  try {
    await x.run(x.dialect === 'sqlite' ? 'BEGIN' : 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    // SQLite fixes the snapshot at the first read: this one.
    const tables = await existingTables(x)
    const head = await headVersion(x, tables)
    const meta = tables.has('contextual_meta') ? (await x.all('SELECT database_id, incarnation FROM contextual_meta WHERE id = 1'))[0] : undefined
    const present = PLAIN_TABLES.filter((t) => tables.has(t.name))
    const totals = new Map<string, number>()
    for (const t of [...present, NODES]) totals.set(t.name, tables.has(t.name) ? await countOf(x, t.name) : 0)
    for (const t of present) {
      const total = totals.get(t.name)!
      let done = 0
      for await (const page of pages(x, t, PAGE)) {
        for (const r of page) await writer.row(t, rowToPortable(t, r))
        onProgress(t.name, (done += page.length), total)
      }
    }
    if (tables.has(NODES.name)) {
      const total = totals.get(NODES.name)!
      let done = 0
      for await (const n of nodeRecords(x, tables)) {
        await writer.node(n)
        if (++done % NODE_PAGE === 0 || done === total) onProgress('nodes', done, total)
      }
    }
    await x.run(x.dialect === 'sqlite' ? 'COMMIT' : 'COMMIT')
    const header = await writer.finish(file, {
      backend: x.dialect,
      databaseId: meta ? String(meta.database_id) : null,
      incarnation: meta ? Number(meta.incarnation) : 0,
      headVersion: head,
      createdAt: new Date().toISOString(),
    })
    return { header, file }
  } catch (error) {
    await writer.abort()
    throw new Error(`backup of ${describeLocation(from)} failed: ${(error as Error).message}`, { cause: error })
  } finally {
    await x.close()
  }
}
