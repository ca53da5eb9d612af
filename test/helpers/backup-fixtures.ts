import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import * as Y from 'yjs'
import { replaceDocContent, type JsonObject, type NodePath } from '../../shared/index.js'
import { HEADER_BYTES } from '../../sync-server/backup/format.js'
import { postgresExec, sqliteExec, sqliteFile, type Exec, type Location } from '../../sync-server/backup/exec.js'
import { NODE_CLIENTS, NODE_UPDATES, NODES, PLAIN_TABLES, q, rowToPortable, selectList, type PortableRow } from '../../sync-server/backup/tables.js'
import type { StorageAdapter } from '../../sync-server/storage/index.js'
import { REPO_ROOT, compiledEntryFor } from './spawn-server.js'
import { api, expectStatus } from './api.js'

/** Every backed-up table of a database, rows in key order, as portable values (what a restore must reproduce). */
export async function dumpTables(at: Location): Promise<Record<string, PortableRow[]>> {
  const x: Exec = 'dataDir' in at ? sqliteExec(sqliteFile(at.dataDir), { mustExist: true }) : await postgresExec(at.databaseUrl, at.schema)
  try {
    const out: Record<string, PortableRow[]> = {}
    for (const t of [...PLAIN_TABLES, NODES, NODE_UPDATES, NODE_CLIENTS]) {
      const rows = await x.all(`SELECT ${selectList(t, x.dialect)} FROM ${q(t.name)} ORDER BY ${t.key.map(q).join(', ')}`)
      out[t.name] = rows.map((r) => rowToPortable(t, r))
    }
    // jsonb and TEXT spell the same JSON differently: compare parsed.
    out.nodes = out.nodes!.map((r) => r.map((v, i) => (NODES.columns[i]![1] === 'json' ? JSON.stringify(sortKeys(JSON.parse(String(v)))) : v)))
    return out
  } finally {
    await x.close()
  }
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys)
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]))
  return v
}

export async function metaOf(at: Location): Promise<{ databaseId: string; incarnation: number; sealKey: string } | null> {
  const x: Exec = 'dataDir' in at ? sqliteExec(sqliteFile(at.dataDir), { mustExist: true }) : await postgresExec(at.databaseUrl, at.schema)
  try {
    const r = (await x.all('SELECT database_id, incarnation, seal_key FROM contextual_meta WHERE id = 1'))[0]
    return r ? { databaseId: String(r.database_id), incarnation: Number(r.incarnation), sealKey: String(r.seal_key) } : null
  } finally {
    await x.close()
  }
}

/** `count` Document nodes under `prefix`, each a real Yjs update, committed through the storage in batches. */
export async function seedNodes(storage: StorageAdapter, prefix: string, count: number, bodyBytes = 200): Promise<void> {
  const at = new Date().toISOString()
  const body = 'x'.repeat(bodyBytes)
  for (let i = 0; i < count; i += 500) {
    const batch = []
    for (let j = i; j < Math.min(count, i + 500); j++) {
      const content: JsonObject = { Title: `node ${j}`, Body: body, N: j }
      const doc = new Y.Doc()
      replaceDocContent(doc, content)
      batch.push(
        storage.commit({ path: `${prefix}/n${j}` as NodePath, kind: 'Created', nodeType: 'Document', name: `node ${j}`, content, createdBy: 'seed', at, update: Y.encodeStateAsUpdate(doc) }),
      )
      doc.destroy()
    }
    await Promise.all(batch)
  }
}

export interface WeftRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/**
 * The `weft` CLI as an operator runs it (a child process, its environment the server's).
 * `killWhen`: SIGKILL the child as soon as its stderr so far matches (the `kill -9` tests).
 */
export function runWeft(args: readonly string[], env: Record<string, string>, killWhen?: RegExp): Promise<WeftRun> {
  return new Promise((resolvePromise, reject) => {
    const compiled = compiledEntryFor('weft')
    const child = spawn(process.execPath, [...(compiled ? [compiled] : ['--import', 'tsx', join(REPO_ROOT, 'sync-server/cli/weft.ts')]), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: '', DATA_DIR: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString()
      if (killWhen?.test(stderr)) child.kill('SIGKILL')
    })
    child.on('error', reject)
    child.on('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr }))
  })
}

/**
 * A writer for "backup while writing": doc `w{i}`, then `counter` N = i, in a loop. A consistent
 * snapshot holding N = k holds w0..wk and at most w{k+1} (`checkCounterSnapshot`).
 */
export async function startCounterWriter(url: string, token: string, space: string): Promise<{ written(): number; stop(): Promise<void> }> {
  const a = api(url, token)
  expectStatus(await a.putNode(`${space}/counter`, 'Document', { N: -1 }), 201)
  let isStopping = false
  let written = 0
  const loop = (async () => {
    for (let i = 0; !isStopping; i++) {
      expectStatus(await a.putNode(`${space}/w${i}`, 'Document', { I: i }), 201)
      expectStatus(await a.patchNode(`${space}/counter`, { N: i }), 200)
      written = i + 1
    }
  })()
  return {
    written: () => written,
    stop: async () => {
      isStopping = true
      await loop
    },
  }
}

/** Reads a restored copy: counter N = k ⇒ w0..wk exist and w{k+2} does not. Returns k. */
export async function checkCounterSnapshot(url: string, token: string, space: string): Promise<number> {
  const c = api(url, token)
  const n = (expectStatus(await c.getNode(`${space}/counter`), 200).body.content as { N: number }).N
  for (let i = 0; i <= n; i++) if ((await c.getNode(`${space}/w${i}`)).status !== 200) throw new Error(`counter ${n} but w${i} missing: not one commit`)
  if ((await c.getNode(`${space}/w${n + 2}`)).status !== 404) throw new Error(`counter ${n} but w${n + 2} present: not one commit`)
  return n
}

/** A table dump as a restore leaves it: leases expired, their tokens cleared ([BAK5]). */
export function withoutLeases(t: Record<string, PortableRow[]>): Record<string, PortableRow[]> {
  return { ...t, contextual_events: t.contextual_events!.map((r) => [...r.slice(0, 8), null, 0, ...r.slice(10)]) }
}

/** A backup record as the file holds it (format.ts). */
export interface BackupRecord {
  t: string
  r: unknown[]
}

/**
 * The backup `good` with its `at`-th body record rewritten by `edit`, and the header's length and
 * checksum made right again (a file crafted to pass the checksum), written to `out`.
 */
export async function rewriteBackupRecord(good: Buffer, at: number, edit: (rec: BackupRecord) => void, out: string): Promise<string> {
  const header = JSON.parse(good.subarray(0, HEADER_BYTES).toString()) as Record<string, unknown>
  const lines = backupLines(good).map((l, i) => {
    if (i !== at) return l
    const rec = JSON.parse(l) as BackupRecord
    edit(rec)
    return JSON.stringify(rec)
  })
  const bytes = Buffer.from(lines.join('\n') + '\n')
  const h = JSON.stringify({ ...header, bodyBytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') })
  await writeFile(out, Buffer.concat([Buffer.from(h.padEnd(HEADER_BYTES - 1, ' ') + '\n'), bytes]))
  return out
}

/** The body records of a backup file, one JSON line each. */
export function backupLines(file: Buffer): string[] {
  return file.subarray(HEADER_BYTES).toString().split('\n').filter(Boolean)
}
