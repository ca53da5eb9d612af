import { createHash, type Hash } from 'node:crypto'
import { open, type FileHandle } from 'node:fs/promises'
import { z } from 'zod'
import { WeftError, isJsonObject, parseNodePath } from '../../shared/index.js'
import { COUNTED_TABLES, NODE_CLIENTS, NODE_UPDATES, NODES, PLAIN_TABLES, fitsKind, fitsTable, withAdded, type PortableRow, type TableSpec } from './tables.js'

/**
 * [BAK2] The backup file: a fixed 4 KiB header (one JSON line padded with spaces), then the body,
 * one JSON line per record:
 *
 *   {"t":"accounts","r":[...]}                     a row of a plain table (tables.ts column order)
 *   {"t":"node","r":[...],"u":[[seq,b64]...],"c":[[client,principal]...]}
 *                                                  a node with its Yjs log and client-id bindings
 *
 * The header is written last (the file is built as `<file>.partial`, then renamed), so it can
 * carry the body's length, its SHA-256 and the count of every table. A restore checks all three,
 * and every record's shape, before it touches the database.
 */
export const FORMAT = 'weft-backup'
/** 2: `node_tombstones` records ([TOMB2]). A version 1 file (none) restores as it did. */
export const FORMAT_VERSION = 2
export const HEADER_BYTES = 4096

export const BackupHeader = z.object({
  format: z.literal(FORMAT),
  formatVersion: z.number().int(),
  /** The storage that wrote it: informational, a file restores into either. */
  backend: z.enum(['sqlite', 'postgres']),
  /** The source's contextual database id and history incarnation (null before first use). */
  databaseId: z.string().nullable(),
  incarnation: z.number().int().nonnegative(),
  /** The mesh commit sequence at the snapshot: the highest version ever handed out. */
  headVersion: z.number().int().nonnegative(),
  createdAt: z.string(),
  counts: z.record(z.string(), z.number().int().nonnegative()),
  bodyBytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
})
export type BackupHeader = z.infer<typeof BackupHeader>

/** [OPS11] A failure a person fixes by choosing another file: WeftError `invalid_backup` (exit code 3). */
export class InvalidBackup extends WeftError {
  constructor(message: string) {
    super('invalid_backup', message)
    this.name = 'InvalidBackup'
  }
}

export interface NodeRecord {
  row: PortableRow
  updates: [number, string | null][]
  clients: [number, string][]
}

export type BodyRecord = { t: 'node'; node: NodeRecord } | { t: 'row'; table: TableSpec; row: PortableRow }

const PLAIN_BY_NAME = new Map(PLAIN_TABLES.map((t) => [t.name, t]))
const FLUSH_BYTES = 1 << 20

/** Writes the body as it comes, then the header; `finish` renames `<file>.partial` into place. */
export class BackupWriter {
  private readonly hash: Hash = createHash('sha256')
  private chunks: string[] = []
  private pending = 0
  private position = HEADER_BYTES
  readonly counts: Record<string, number> = Object.fromEntries(COUNTED_TABLES.map((t) => [t, 0]))

  private constructor(
    private readonly fh: FileHandle,
    readonly partial: string,
  ) {}

  static async create(file: string): Promise<BackupWriter> {
    const partial = `${file}.partial`
    const fh = await open(partial, 'w')
    await fh.write(Buffer.alloc(HEADER_BYTES, 0x20), 0, HEADER_BYTES, 0)
    return new BackupWriter(fh, partial)
  }

  async row(table: TableSpec, row: PortableRow): Promise<void> {
    this.counts[table.name]!++
    await this.line(JSON.stringify({ t: table.name, r: row }))
  }

  async node(n: NodeRecord): Promise<void> {
    this.counts[NODES.name]!++
    this.counts[NODE_UPDATES.name]! += n.updates.length
    this.counts[NODE_CLIENTS.name]! += n.clients.length
    await this.line(JSON.stringify({ t: 'node', r: n.row, u: n.updates, c: n.clients }))
  }

  get bytes(): number {
    return this.position - HEADER_BYTES + this.pending
  }

  private async line(text: string): Promise<void> {
    this.chunks.push(text, '\n')
    this.pending += text.length + 1
    if (this.pending >= FLUSH_BYTES) await this.flush()
  }

  private async flush(): Promise<void> {
    if (this.chunks.length === 0) return
    const buf = Buffer.from(this.chunks.join(''), 'utf8')
    this.chunks = []
    this.pending = 0
    this.hash.update(buf)
    await this.fh.write(buf, 0, buf.length, this.position)
    this.position += buf.length
  }

  /** Writes the header, syncs, and renames the file into place. */
  async finish(file: string, header: Omit<BackupHeader, 'format' | 'formatVersion' | 'counts' | 'bodyBytes' | 'sha256'>): Promise<BackupHeader> {
    await this.flush()
    const full: BackupHeader = { format: FORMAT, formatVersion: FORMAT_VERSION, ...header, counts: this.counts, bodyBytes: this.position - HEADER_BYTES, sha256: this.hash.digest('hex') }
    const json = JSON.stringify(full)
    if (Buffer.byteLength(json) > HEADER_BYTES - 1) throw new Error('backup header too large')
    await this.fh.write(Buffer.from(json.padEnd(HEADER_BYTES - 1, ' ') + '\n'), 0, HEADER_BYTES, 0)
    await this.fh.sync()
    await this.fh.close()
    const { rename } = await import('node:fs/promises')
    await rename(this.partial, file)
    return full
  }

  async abort(): Promise<void> {
    await this.fh.close().catch(() => undefined)
    const { rm } = await import('node:fs/promises')
    await rm(this.partial, { force: true })
  }
}

export async function readHeader(fh: FileHandle, file: string): Promise<BackupHeader> {
  const buf = Buffer.alloc(HEADER_BYTES)
  const { bytesRead } = await fh.read(buf, 0, HEADER_BYTES, 0)
  if (bytesRead < HEADER_BYTES || buf[HEADER_BYTES - 1] !== 0x0a) throw new InvalidBackup(`${file} is not a Weft backup (no header).`)
  let parsed: unknown
  try {
    parsed = JSON.parse(buf.toString('utf8'))
  } catch {
    throw new InvalidBackup(`${file} is not a Weft backup (its header is not JSON).`)
  }
  const format = (parsed as { format?: unknown } | null)?.format
  if (format !== FORMAT) throw new InvalidBackup(`${file} is not a Weft backup (format ${JSON.stringify(format)}).`)
  const header = BackupHeader.safeParse(parsed)
  if (!header.success) throw new InvalidBackup(`${file}: the header is damaged (${header.error.issues[0]?.message ?? 'invalid'}).`)
  if (header.data.formatVersion < 1 || header.data.formatVersion > FORMAT_VERSION) {
    throw new InvalidBackup(`${file} has format version ${header.data.formatVersion}; this weft reads version ${FORMAT_VERSION}. Use the weft that wrote it.`)
  }
  return header.data
}

function isJsonContent(text: string): boolean {
  try {
    return isJsonObject(JSON.parse(text))
  } catch {
    return false
  }
}

function parseRecord(line: string, at: number): BodyRecord {
  let v: { t?: unknown; r?: unknown; u?: unknown; c?: unknown }
  try {
    v = JSON.parse(line) as typeof v
  } catch {
    throw new InvalidBackup(`record ${at} is not JSON.`)
  }
  if (v === null || typeof v !== 'object') throw new InvalidBackup(`record ${at} is not an object.`)
  if (v.t === 'node') {
    if (!fitsTable(NODES, v.r)) throw new InvalidBackup(`record ${at}: a node row of the wrong shape.`)
    // A file can be crafted with a correct checksum: what the server would choke on is refused here too.
    try {
      parseNodePath(v.r[0])
    } catch {
      throw new InvalidBackup(`record ${at}: ${JSON.stringify(v.r[0])} is not a node path.`)
    }
    if (!isJsonContent(String(v.r[NODES.columns.findIndex(([c]) => c === 'content')]))) throw new InvalidBackup(`record ${at}: the node's content is not a JSON object.`)
    const updates = v.u
    const clients = v.c
    if (!Array.isArray(updates) || !updates.every((u) => Array.isArray(u) && u.length === 2 && fitsKind('int', u[0]) && fitsKind('bytes?', u[1]))) {
      throw new InvalidBackup(`record ${at}: a node's updates of the wrong shape.`)
    }
    if (!Array.isArray(clients) || !clients.every((c) => Array.isArray(c) && c.length === 2 && fitsKind('int', c[0]) && fitsKind('text', c[1]))) {
      throw new InvalidBackup(`record ${at}: a node's client bindings of the wrong shape.`)
    }
    return { t: 'node', node: { row: v.r, updates: updates as NodeRecord['updates'], clients: clients as NodeRecord['clients'] } }
  }
  const table = typeof v.t === 'string' ? PLAIN_BY_NAME.get(v.t) : undefined
  if (!table) throw new InvalidBackup(`record ${at}: unknown table ${JSON.stringify(v.t)}.`)
  const row = withAdded(table, v.r)
  if (!fitsTable(table, row)) throw new InvalidBackup(`record ${at}: a ${table.name} row of the wrong shape.`)
  return { t: 'row', table, row }
}

/**
 * Reads the body record by record (lines split on bytes, the hash taken over the same bytes).
 * `verify`: checks length, checksum and counts at the end and throws InvalidBackup on any
 * difference; a restore runs it once before it starts, then again while it applies.
 */
export async function* readBody(fh: FileHandle, header: BackupHeader): AsyncGenerator<BodyRecord> {
  const hash = createHash('sha256')
  const counts: Record<string, number> = {}
  const count = (t: string, n = 1) => (counts[t] = (counts[t] ?? 0) + n)
  let position = HEADER_BYTES
  let rest: Buffer = Buffer.alloc(0)
  let records = 0
  const buf = Buffer.alloc(FLUSH_BYTES)
  for (;;) {
    const { bytesRead } = await fh.read(buf, 0, buf.length, position)
    if (bytesRead === 0) break
    position += bytesRead
    const chunk = buf.subarray(0, bytesRead)
    hash.update(chunk)
    let data = rest.length ? Buffer.concat([rest, chunk]) : Buffer.from(chunk)
    let start = 0
    for (let nl = data.indexOf(0x0a, start); nl !== -1; nl = data.indexOf(0x0a, start)) {
      const rec = parseRecord(data.toString('utf8', start, nl), ++records)
      start = nl + 1
      if (rec.t === 'node') {
        count(NODES.name)
        count(NODE_UPDATES.name, rec.node.updates.length)
        count(NODE_CLIENTS.name, rec.node.clients.length)
      } else count(rec.table.name)
      yield rec
    }
    rest = data.subarray(start)
    data = Buffer.alloc(0)
  }
  const bodyBytes = position - HEADER_BYTES
  if (bodyBytes !== header.bodyBytes) throw new InvalidBackup(`the file is ${bodyBytes < header.bodyBytes ? 'truncated' : 'longer than written'}: ${bodyBytes} body bytes, the header says ${header.bodyBytes}.`)
  if (rest.length > 0) throw new InvalidBackup('the last record is cut short.')
  if (hash.digest('hex') !== header.sha256) throw new InvalidBackup('the checksum does not match: the file is damaged.')
  for (const t of COUNTED_TABLES) {
    if ((counts[t] ?? 0) !== (header.counts[t] ?? 0)) throw new InvalidBackup(`${t}: ${counts[t] ?? 0} rows, the header says ${header.counts[t] ?? 0}.`)
  }
}

/** The whole verification: header, every record, length, checksum, counts. Touches nothing. */
export async function verifyBackup(file: string, onRecord?: (n: number) => void): Promise<BackupHeader> {
  let fh: FileHandle
  try {
    fh = await open(file, 'r')
  } catch (error) {
    throw new InvalidBackup(`cannot read ${file}: ${(error as Error).message}`)
  }
  try {
    const header = await readHeader(fh, file)
    let n = 0
    for await (const _ of readBody(fh, header)) onRecord?.(++n)
    return header
  } catch (error) {
    if (error instanceof InvalidBackup && !error.message.startsWith(file)) throw new InvalidBackup(`${file}: ${error.message}`)
    throw error
  } finally {
    await fh.close()
  }
}
