import { join } from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { expect } from 'vitest'
import { MuxClient, api, createDocument, createSpace, expectStatus, signup, spawnServer, type SpawnedServer } from '../helpers/index.js'

/** Where the spawned servers keep their data: a SQLite directory, or a PostgreSQL database. */
export interface StaleRowsBackend {
  dataDir: string
  /** DATABASE_URL for the children; absent: SQLite in dataDir. */
  databaseUrl?: string
}

/** The stored row as a crash left it: `content_stale` and the content column. */
async function storedRow(backend: StaleRowsBackend, path: string): Promise<{ stale: boolean; content: Record<string, unknown> }> {
  if (backend.databaseUrl) {
    const client = new pg.Client({ connectionString: backend.databaseUrl })
    await client.connect()
    try {
      const r = await client.query<{ content_stale: boolean; content: Record<string, unknown> }>('SELECT content_stale, content FROM nodes WHERE path = $1', [path])
      return { stale: r.rows[0]!.content_stale, content: r.rows[0]!.content }
    } finally {
      await client.end()
    }
  }
  const db = new Database(join(backend.dataDir, 'weft.db'), { readonly: true, fileMustExist: true })
  try {
    const row = db.prepare<[string], { content_stale: number; content: string }>('SELECT content_stale, content FROM nodes WHERE path = ?').get(path)!
    return { stale: row.content_stale === 1, content: JSON.parse(row.content) as Record<string, unknown> }
  } finally {
    db.close()
  }
}

/**
 * [STO5] A client's edit acknowledged, then `kill -9` inside the row-content coalescing window:
 * the row on disk is stale. After the restart the row is repaired before the server listens, so
 * `where.` queries see the acknowledged value at once (and forever after), not the old one.
 */
export async function staleRowsAfterKill9(backend: StaleRowsBackend, children: SpawnedServer[]): Promise<void> {
  const env: Record<string, string> = backend.databaseUrl ? { DATABASE_URL: backend.databaseUrl } : {}
  const first = await spawnServer({ dataDir: backend.dataDir, env })
  children.push(first)
  const user = await signup(first.url)
  const space = await createSpace(first.url, user.token)
  const paths = [
    await createDocument(first.url, user.token, `${space}/doc`, { tag: 'old', n: 1 }),
    await createDocument(first.url, user.token, `${space}/other`, { tag: 'old', n: 2 }),
  ]
  const mux = await MuxClient.connect(first.url, user.token)
  for (const path of paths) expect(await mux.join(path)).toMatchObject({ ok: true })
  // Acknowledged = durable ([STO1]); the row's content is written up to a second later ([STO5]).
  for (const path of paths) expect(await mux.patch(path, { tag: 'new' })).toMatchObject({ ok: true })
  await first.kill('SIGKILL')
  await mux.close()
  // The precondition: the crash left the rows stale, holding the old value.
  for (const path of paths) expect(await storedRow(backend, path)).toMatchObject({ stale: true, content: { tag: 'old' } })

  const second = await spawnServer({ dataDir: backend.dataDir, env })
  children.push(second)
  const http = api(second.url, user.token)
  // The first answer after the restart is already right: no waiting for a flush.
  const listed = expectStatus(await http.queryNodes({ parent: space, where: { tag: 'new' } }), 200).body.items.map((n) => n.path)
  expect(listed).toEqual(paths)
  expect(expectStatus(await http.queryNodes({ parent: space, where: { tag: 'old' } }), 200).body.items).toEqual([])
  expect(expectStatus(await http.getNode(paths[0]!), 200).body.content).toEqual({ tag: 'new', n: 1 })
  // And the rows themselves are repaired (the log is not replayed on every read from now on).
  for (const [i, path] of paths.entries()) expect(await storedRow(backend, path)).toEqual({ stale: false, content: { tag: 'new', n: i + 1 } })
  await second.kill('SIGTERM')
}
