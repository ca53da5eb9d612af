import { afterAll, describe, expect, it } from 'vitest'
import * as Y from 'yjs'
import { MuxType } from '../../shared/index.js'
import {
  MuxClient,
  api,
  createSpace,
  encodeCrafted,
  expectStatus,
  grantRole,
  itemAfter,
  makeTempDir,
  partlyKnownEntry,
  removeDir,
  rootEntry,
  signup,
  spawnServer,
  waitFor,
  type SpawnedServer,
} from '../helpers/index.js'

/**
 * [ACC10] + [STO1] under the worst timing: an Editor floods honest edits while another socket
 * floods crafted ones (forged system fields, forward references, partly-known structs), and the
 * server is killed with SIGKILL mid-flood. After a restart every acknowledged honest write is
 * there and no refused byte is.
 */
const HONEST = 1500

describe('[ACC10] kill -9 during a flood of crafted and honest updates', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  it('every acked honest edit survives; nothing refused is stored', { timeout: 120_000 }, async () => {
    dir = await makeTempDir('weft-gate-kill9-')
    const first = await spawnServer({ dataDir: dir })
    children.push(first)
    const admin = await signup(first.url)
    const editor = await signup(first.url)
    const space = await createSpace(first.url, admin.token)
    await grantRole(first.url, admin.token, space, editor.userId, 'Editor')
    const path = `${space}/_Activity/flood`
    expectStatus(await api(first.url, editor.token).putNode(path, 'ActivityLog', { Category: 'flood' }), 201)

    const honest = await MuxClient.connect(first.url, editor.token)
    honest.doc(path).clientID = 1111
    expect(await honest.join(path)).toMatchObject({ ok: true })
    const acked = new Set<number>()
    const sent: Promise<void>[] = []
    let killed = false

    // The attacker: crafted updates on sockets of its own (each closed after its refusal budget).
    let attacking = true
    const attack = (async () => {
      let n = 0
      while (attacking) {
        const m = await MuxClient.connect(first.url, editor.token).catch(() => null)
        if (!m) return
        if (!(await m.join(path)).ok) return
        while (attacking && m.isOpen) {
          const c = 50_000 + n++
          const bytes = [
            encodeCrafted([{ client: c, clock: 0, structs: [rootEntry(c, 0, 'Status', ['Succeeded'])] }]),
            encodeCrafted([{ client: c, clock: 0, structs: [itemAfter(c, 0, Y.createID(c, 3), new Y.ContentAny([1])), rootEntry(c, 1, 'Messages', [[]])] }]),
            partlyKnownEntry(1111, 0, 'End', Array.from({ length: 400 }, () => 'x')),
          ][n % 3]!
          m.send({ type: MuxType.Update, path, seq: n, update: bytes })
          await new Promise((r) => setImmediate(r))
        }
        await m.close()
      }
    })()

    for (let i = 0; i < HONEST && !killed; i++) {
      sent.push(
        honest.patch(path, { [`h${i}`]: i }).then((r) => {
          if (r.ok) acked.add(i)
        }),
      )
      if (i % 50 === 49) await new Promise((r) => setTimeout(r, 5))
      if (!killed && acked.size >= 300) {
        killed = true
        await first.kill('SIGKILL')
      }
    }
    if (!killed) {
      await waitFor(() => acked.size >= 300)
      await first.kill('SIGKILL')
    }
    attacking = false
    await Promise.allSettled(sent)
    await attack.catch(() => undefined)
    expect(acked.size).toBeGreaterThanOrEqual(300)

    const second = await spawnServer({ dataDir: dir })
    children.push(second)
    const node = expectStatus(await api(second.url, editor.token).getNode(path), 200).body as { content: Record<string, unknown> }
    for (const i of acked) expect(node.content[`h${i}`], `acked h${i}`).toBe(i)
    for (const forged of ['Status', 'Messages', 'End']) expect(node.content[forged]).toBeUndefined()
    const stray = Object.keys(node.content).filter((k) => k !== 'Category' && !/^h\d+$/.test(k))
    expect(stray).toEqual([])
    // And the node still syncs: a fresh client joins and edits it.
    const after = await MuxClient.connect(second.url, editor.token)
    expect(await after.join(path)).toMatchObject({ ok: true })
    expect(await after.patch(path, { Inputs: { again: true } })).toMatchObject({ ok: true })
    await after.close()
  })
})
