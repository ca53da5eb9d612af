/**
 * The gate's cost ([ACC10], issue 9):
 *  - `admission1MbUs` / `admission1KbUs` / `admissionRatio1MbTo1Kb`: `admitUpdate` alone for a
 *    one-field update (FullName) to a User doc of ~1 MB (a 10,000-entry map and 400 KB of text,
 *    many structs) and of ~1 KB, same client, same field; median µs over 2,000 updates each.
 *    Goal ratio ≤ 1.5: admission looks at the update, never at the whole doc.
 *  - `ackP50On1MbMs` / `ackP50On1KbMs` / `ackRatio1MbTo1Kb`: end to end over a real `/mux`
 *    socket on a real server (SQLite, fsync'd): a one-field Update → its durable Ack, p50 of 300
 *    sequential updates on a ~1 MB and a ~1 KB User node. Goal ratio ≤ 3.
 *  - `healthzP99DuringRefusalFloodMs`: GET /healthz p99 over 3 s while a Viewer's sockets flood
 *    refused updates as fast as they can (reconnecting after each 4429). Goal < 20 ms.
 *  - `refusedUpdatesDuringFlood`: how many the server refused meanwhile.
 * `WEFT_ADMISSION_RUNS` > 0 also runs the adversarial property test with that many cases.
 * Run alone: `npx tsx test/bench/gate-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { spawnSync } from 'node:child_process'
import { pathToFileURL } from 'node:url'
import * as Y from 'yjs'
import { CONTENT_MAP, MuxType, applyPatchToDoc } from '../../shared/index.js'
import { admitUpdate } from '../../sync-server/admission/index.js'
import { MuxClient, api, createDocument, createSpace, encodeCrafted, expectStatus, grantRole, makeTempDir, removeDir, rootEntry, signup, spawnServer, startTestServer } from '../helpers/index.js'
import { REPO_ROOT } from '../helpers/spawn-server.js'
import { percentile, round } from './stats.js'

export const GOALS: Record<string, { op: '<' | '<=' | '>' | '>='; value: number; unit?: string }> = {
  admissionRatio1MbTo1Kb: { op: '<=', value: 1.5, unit: '×' },
  ackRatio1MbTo1Kb: { op: '<=', value: 3, unit: '×' },
  healthzP99DuringRefusalFloodMs: { op: '<', value: 20, unit: 'ms' },
}


/** A server doc and a synced client; `big` makes the doc ~1 MB of many structs. */
function docs(big: boolean): { server: Y.Doc; client: Y.Doc } {
  const server = new Y.Doc()
  applyPatchToDoc(server, { Email: 'a@b.c', FullName: 'A', PinnedPaths: [] })
  if (big) {
    const entries: Record<string, string> = {}
    for (let i = 0; i < 10_000; i++) entries[`k${i}`] = `value-${i}-${'x'.repeat(40)}`
    applyPatchToDoc(server, { Index: entries })
    const text = new Y.Text()
    server.getMap(CONTENT_MAP).set('Notes', text)
    for (let i = 0; i < 4000; i++) text.insert(text.length, 'y'.repeat(100))
  }
  const client = new Y.Doc()
  Y.applyUpdate(client, Y.encodeStateAsUpdate(server))
  return { server, client }
}

function admissionMedianUs(big: boolean, count = 2000): { us: number; bytes: number } {
  const { server, client } = docs(big)
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    let update: Uint8Array | null = null
    const grab = (u: Uint8Array) => (update = u)
    client.once('update', grab)
    applyPatchToDoc(client, { FullName: `name ${i}` })
    const t0 = performance.now()
    const r = admitUpdate(server, update!, { maxDepth: 64, mayWriteStructure: true })
    samples.push((performance.now() - t0) * 1000)
    if (!r.ok || !r.update) throw new Error('bench update refused')
    Y.applyUpdate(server, r.update)
  }
  return { us: percentile(samples, 50), bytes: Y.encodeStateAsUpdate(server).length }
}

async function ackP50(url: string, token: string, path: string, count = 300): Promise<number> {
  const m = await MuxClient.connect(url, token)
  if (!(await m.join(path)).ok) throw new Error(`join ${path} failed`)
  for (let i = 0; i < 20; i++) await m.patch(path, { FullName: `warm ${i}` })
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    const t0 = performance.now()
    const r = await m.patch(path, { FullName: `n ${i}` })
    samples.push(performance.now() - t0)
    if (!r.ok) throw new Error(`update refused: ${r.code}`)
  }
  await m.close()
  return percentile(samples, 50)
}

async function benchEndToEnd(): Promise<Record<string, number>> {
  const ts = await startTestServer()
  try {
    const small = await signup(ts.url)
    const large = await signup(ts.url)
    // ~1 MB of the user's own fields, in two patches under the 1 MiB body limit.
    for (let part = 0; part < 2; part++) {
      const entries: Record<string, string> = {}
      for (let i = 0; i < 5000; i++) entries[`k${part}-${i}`] = `value-${i}-${'x'.repeat(80)}`
      expectStatus(await api(ts.url, large.token).patchNode(large.userId, { [`Index${part}`]: entries }), 200)
    }
    const size = JSON.stringify((await api(ts.url, large.token).getNode(large.userId)).body).length
    const kb = await ackP50(ts.url, small.token, small.userId)
    const mb = await ackP50(ts.url, large.token, large.userId)
    const kb2 = await ackP50(ts.url, small.token, small.userId)
    const base = Math.min(kb, kb2)
    return { bigUserNodeBytes: size, ackP50On1KbMs: round(base), ackP50On1MbMs: round(mb), ackRatio1MbTo1Kb: round(mb / base) }
  } finally {
    await ts.cleanup()
  }
}

async function benchFlood(): Promise<Record<string, number>> {
  // A server process of its own: the event loop measured is the server's, not this client's.
  const dir = await makeTempDir('weft-gate-flood-')
  const ts = await spawnServer({ dataDir: dir })
  try {
    const admin = await signup(ts.url)
    const viewer = await signup(ts.url)
    const space = await createSpace(ts.url, admin.token)
    await grantRole(ts.url, admin.token, space, viewer.userId, 'Viewer')
    const path = await createDocument(ts.url, admin.token, `${space}/target`, { a: 1 })
    let flooding = true
    let refused = 0
    const flood = (async () => {
      let n = 0
      while (flooding) {
        const m = await MuxClient.connect(ts.url, viewer.token)
        if (!(await m.join(path)).ok) break
        m.onFrame((f) => f.type === MuxType.Refused && refused++)
        while (flooding && m.isOpen) {
          const c = 100_000 + n++
          m.send({ type: MuxType.Update, path, seq: n, update: encodeCrafted([{ client: c, clock: 0, structs: [rootEntry(c, 0, 'a', [n])] }]) })
          if (n % 20 === 0) await new Promise((r) => setImmediate(r))
        }
        await m.close()
      }
    })()
    const samples: number[] = []
    const until = performance.now() + 3000
    while (performance.now() < until) {
      const t0 = performance.now()
      const res = await fetch(`${ts.url}/healthz`)
      await res.text()
      samples.push(performance.now() - t0)
    }
    flooding = false
    await flood
    return { healthzP50DuringRefusalFloodMs: round(percentile(samples, 50)), healthzP99DuringRefusalFloodMs: round(percentile(samples, 99)), refusedUpdatesDuringFlood: refused }
  } finally {
    await ts.kill('SIGTERM')
    await removeDir(dir)
  }
}

export async function benchGate(): Promise<Record<string, number | string>> {
  const kb = admissionMedianUs(false)
  const mb = admissionMedianUs(true)
  const out: Record<string, number | string> = {
    admissionDoc1KbBytes: kb.bytes,
    admissionDoc1MbBytes: mb.bytes,
    admission1KbUs: round(kb.us),
    admission1MbUs: round(mb.us),
    admissionRatio1MbTo1Kb: round(mb.us / kb.us),
    ...(await benchEndToEnd()),
    ...(await benchFlood()),
  }
  const runs = Number(process.env.WEFT_ADMISSION_RUNS ?? 0)
  if (runs > 0) {
    const t0 = performance.now()
    const r = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', 'sync-server/admission/admit-update.property.test.ts'], {
      cwd: REPO_ROOT,
      env: { ...process.env, WEFT_ADMISSION_RUNS: String(runs) },
      encoding: 'utf8',
    })
    out.propertyCases = runs
    out.propertyResult = r.status === 0 ? 'passed' : `FAILED: ${(r.stdout + r.stderr).slice(-400)}`
    out.propertySeconds = round((performance.now() - t0) / 1000, 1)
  }
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await benchGate(), null, 2))
  process.exit(0)
}
