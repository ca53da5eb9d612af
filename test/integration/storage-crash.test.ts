import { spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { docToJson, type NodePath } from '../../shared/index.js'
import { openStorage, type StorageAdapter } from '../../sync-server/storage/index.js'

const CHILD = fileURLToPath(new URL('./fixtures/storage-crash-child.ts', import.meta.url))
const KILL_AFTER_ACKS = 300

describe('storage: SQLite durability under kill -9', () => {
  let dataDir: string | undefined
  let store: StorageAdapter | undefined
  afterEach(async () => {
    await store?.close()
    if (dataDir) await rm(dataDir, { recursive: true, force: true })
  })

  it('keeps every acknowledged commit after the process is killed mid-write', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'weft-crash-'))
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dataDir], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)))

    const acks: { version: number; n: number }[] = []
    const lines = createInterface({ input: child.stdout })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child made ${acks.length} acks in time; stderr: ${stderr}`)), 25_000)
      lines.on('line', (line) => {
        const m = /^ack (\d+) (\d+)$/.exec(line)
        if (!m) return
        acks.push({ version: Number(m[1]), n: Number(m[2]) })
        if (acks.length === KILL_AFTER_ACKS) {
          // Killed while commits are in flight: some of a batch are acknowledged, some not.
          child.kill('SIGKILL')
          clearTimeout(timer)
          resolve()
        }
      })
      void exited.then((how) => reject(new Error(`child exited early (${String(how)}): ${stderr}`)))
    })
    expect(await exited).toBe('SIGKILL')
    // Lines already buffered in the pipe were acknowledged too.
    await new Promise((r) => setImmediate(r))
    expect(acks.length).toBeGreaterThanOrEqual(KILL_AFTER_ACKS)

    store = await openStorage({ dataDir })
    const path = 'crash/node' as NodePath
    const changes = await store.changesSince(0, 10_000)
    const versions = new Set(changes.map((c) => c.version))
    for (const ack of acks) expect(versions.has(ack.version), `acked version ${ack.version}`).toBe(true)
    expect(await store.lastVersion()).toBeGreaterThanOrEqual(Math.max(...acks.map((a) => a.version)))

    const stored = await store.loadDoc(path)
    expect(stored).not.toBeNull()
    const doc = new Y.Doc()
    if (stored?.snapshot) Y.applyUpdate(doc, stored.snapshot)
    for (const u of stored?.updates ?? []) Y.applyUpdate(doc, u)
    const content = docToJson(doc)
    for (const ack of acks) expect(content[`F${ack.n}`], `acked update ${ack.n}`).toBe(ack.n)
    // The materialised row and the log agree: both were written in the same transactions.
    expect((await store.getNode(path))?.content).toEqual(content)
    // Nothing half-written: every committed change has its update in the doc.
    expect(Object.keys(content).filter((k) => k.startsWith('F'))).toHaveLength(changes.length)
  })
})
