import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import pg from 'pg'
import pino from 'pino'
import { SYSTEM, userPrincipal, type NodePath, type UserId } from '../../shared/index.js'
import { AccessService } from '../../sync-server/access/access-service.js'
import { NodeService } from '../../sync-server/nodes/node-service.js'
import { SearchService } from '../../sync-server/search/index.js'
import { openPostgresStorage } from '../../sync-server/storage/postgres-adapter.js'
import { planSearch } from '../../sync-server/storage/search-plan.js'
import type { StorageAdapter } from '../../sync-server/storage/types.js'

/** [FIND1] [FIND2] [FIND3] Quick find on PostgreSQL (tsvector + GIN), a fresh schema. */
const connectionString = process.env.WEFT_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = `weft_test_${randomBytes(6).toString('hex')}`
let storage: StorageAdapter
let nodes: NodeService
let search: SearchService
const alice = userPrincipal('alice' as UserId)
const put = (path: string, nodeType: string, content = {}, name?: string) => nodes.update(SYSTEM, path as NodePath, () => ({ nodeType, name, content }), 'system')
const found = async (q: string, limit?: number) => (await search.search(alice, q, limit)).map((h) => h.path)

async function open(): Promise<void> {
  storage = await openPostgresStorage({ connectionString, schema })
  nodes = new NodeService(storage, new AccessService(), { idleUnloadMs: 60_000, log: pino({ level: 'silent' }) })
  await nodes.boot()
  search = new SearchService(nodes, storage)
}

async function close(): Promise<void> {
  await nodes?.close()
  await storage?.close()
}

beforeAll(async () => {
  await open()
  await put('alice', 'User', { Email: 'alice@example.com', FullName: 'Alice' })
  await put('Shared', 'Space')
  await put('Shared/_Access/alice_Access', 'AccessAssignment', { Subject: 'alice', Role: 'Viewer' })
  await put('Hidden', 'Space')
})
afterAll(async () => {
  await close()
  const client = new pg.Client({ connectionString })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await client.end()
})

describe('quick find on PostgreSQL', () => {
  it('[FIND1] names in any language: 日本語 finds 日本語のメモ, 메모 finds 한국어 메모, 🚀 finds 🚀 (a word prefix; no lexeme: the name)', async () => {
    await put('Shared/jp', 'Document', { Body: '会議 の 議事録' }, '日本語のメモ')
    await put('Shared/ko', 'Document', {}, '한국어 메모')
    await put('Shared/rocket', 'Document', {}, '🚀 launch')
    expect(await found('日本語')).toEqual(['Shared/jp'])
    expect(await found('議事録')).toEqual(['Shared/jp'])
    expect(await found('메모')).toEqual(['Shared/ko'])
    expect(await found('🚀')).toEqual(['Shared/rocket'])
    expect(await found('laun')).toEqual(['Shared/rocket'])
  })

  it('[FIND1] every write path keeps the index: create, patch, replace, delete', async () => {
    await put('Shared/w', 'Document', { Text: 'alpha' })
    expect(await found('alpha')).toEqual(['Shared/w'])
    await nodes.patch(SYSTEM, 'Shared/w' as NodePath, { Text: 'bravo', Deep: { List: ['charlie'] } })
    expect(await found('alpha')).toEqual([])
    expect(await found('charlie bravo')).toEqual(['Shared/w'])
    await nodes.delete(SYSTEM, 'Shared/w' as NodePath)
    expect(await found('bravo')).toEqual([])
  })

  it('[FIND2] unreadable matches never show and never push readable ones out; names rank first', async () => {
    await Promise.all(Array.from({ length: 600 }, (_, i) => put(`Hidden/z${String(i).padStart(3, '0')}`, 'Document', {}, 'zulu')))
    await put('Shared/z-text', 'Document', { Note: 'zulu in the text' })
    await put('Shared/z-name', 'Document', {}, 'zulu notes')
    // More unreadable matches than one page of the storage scan (500): the readable ones still come.
    expect(await found('zulu', 1)).toEqual(['Shared/z-name'])
    expect(await found('zulu')).toEqual(['Shared/z-name', 'Shared/z-text'])
  })

  it('[FIND4] driven by the readable regions: no row outside them reaches the access check', async () => {
    const offered: string[] = []
    const hits = await storage.searchNodes(planSearch('zulu'), (p) => (offered.push(p), true), 50, nodes.readRegions(alice)!)
    expect(hits.map((h) => h.path)).toEqual(['Shared/z-name', 'Shared/z-text'])
    expect(offered.filter((p) => p.startsWith('Hidden/'))).toEqual([])
  })

  it('[FIND3] FTS and tsquery syntax is plain text: never an error', async () => {
    await put('Shared/syntax', 'Document', { Text: "it's a:b (c) & d | !e" })
    for (const q of ['"', "'", "it's", ':*', 'a:b', '(c)', '&', '|', '!e', '\\', 'NEAR(', '*', "'':*", '<->']) {
      await expect(search.search(alice, q)).resolves.toBeInstanceOf(Array)
    }
    expect(await found("it's")).toEqual(['Shared/syntax'])
  })

  it('[FIND1] a data set from before the index gains it at open', async () => {
    await close()
    const client = new pg.Client({ connectionString })
    await client.connect()
    await client.query(`SET search_path = "${schema}"; DROP TRIGGER nodes_search ON nodes; ALTER TABLE nodes DROP COLUMN search; DROP TABLE schema_state;`)
    await client.end()
    await open()
    expect(await found('日本語')).toEqual(['Shared/jp'])
  })
})
