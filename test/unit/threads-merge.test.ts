import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as Y from 'yjs'
import { docToJson, replaceDocContent, roundInputs, strings, textPolicyFor, type JsonObject, type NodePath } from '../../shared/index.js'
import { claimedContent, enqueuedContent, idOf, without } from '../../sync-server/engines/threads/model.js'

/**
 * [THR26] A thread's round state on several instances' copies. Each instance writes the thread
 * as the server does (`replaceDocContent` of the whole content, one Yjs transaction on its own
 * copy of the doc); copies take each other's updates at arbitrary moments: one instance's own
 * updates, in order, as the fan-out relays them (an update whose dependencies have not arrived
 * waits in the doc, the rest of it applied), or everything missing, as the change log's catch-up.
 * The guarantee: every posted message is taken by exactly one round, whatever the interleaving.
 */
const SEED = Number(process.env.THREADS_MERGE_SEED ?? 2606)
const T = 'S/t' as NodePath
const isText = textPolicyFor('Thread')

function write(doc: Y.Doc, content: JsonObject): void {
  replaceDocContent(doc, content, 'system', isText)
}

function sync(from: Y.Doc, to: Y.Doc): void {
  Y.applyUpdate(to, Y.encodeStateAsUpdate(from, Y.encodeStateVector(to)))
}

/**
 * A thread that has been posted to once (`m0`, answered): its `Posted` map exists on every copy.
 * (A thread's first enqueue makes the map: two first enqueues at the same moment on two copies
 * make two maps, and the merge keeps one: the one case [THR26] leaves.)
 */
function started(): Y.Doc {
  const doc = new Y.Doc()
  write(doc, enqueuedContent(T, { Agent: { Kind: 'builtin' }, Status: 'Idle' }, 'm0')!)
  write(doc, claimedContent(T, docToJson(doc), new Date(0).toISOString())!.content)
  write(doc, { ...without(docToJson(doc), 'Round'), Status: 'Idle', Disposition: 'Completed' })
  return doc
}

type Op = { kind: 'post'; on: number } | { kind: 'claim' } | { kind: 'finish' } | { kind: 'sync' | 'relay'; from: number; to: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('post' as const), on: fc.integer({ min: 0, max: 2 }) }),
  fc.constant({ kind: 'claim' as const }),
  fc.constant({ kind: 'finish' as const }),
  fc.record({ kind: fc.constant('sync' as const), from: fc.integer({ min: 0, max: 2 }), to: fc.integer({ min: 0, max: 2 }) }),
  fc.record({ kind: fc.constant('relay' as const), from: fc.integer({ min: 0, max: 2 }), to: fc.integer({ min: 0, max: 2 }) }),
)

/** Runs `ops` on three copies (copy 0 is the engine's owner); returns the ids each round took and the posted ids. */
function run(ops: readonly Op[], start: () => Y.Doc): { taken: string[]; posted: string[]; left: NodePath[]; listed: string[][] } {
  const base = start()
  const copies = [0, 1, 2].map((i) => {
    const doc = new Y.Doc()
    doc.clientID = 1000 + i
    Y.applyUpdate(doc, Y.encodeStateAsUpdate(base))
    return doc
  })
  const owner = copies[0]!
  // Each copy's own updates, and how many of them each other copy has been relayed.
  const own: Uint8Array[][] = copies.map(() => [])
  const relayed = copies.map(() => copies.map(() => 0))
  const writeOn = (i: number, content: JsonObject): void => {
    const doc = copies[i]!
    const before = Y.encodeStateVector(doc)
    replaceDocContent(doc, content, 'system', isText)
    own[i]!.push(Y.encodeStateAsUpdate(doc, before))
  }
  const relay = (from: number, to: number): void => {
    const log = own[from]!
    for (let k = relayed[from]![to]!; k < log.length; k++) Y.applyUpdate(copies[to]!, log[k]!)
    relayed[from]![to] = log.length
  }
  const taken: string[] = []
  const posted: string[] = []
  let n = 0
  const claim = (): boolean => {
    const claimed = claimedContent(T, docToJson(owner), new Date(0).toISOString())
    if (!claimed) return false
    writeOn(0, claimed.content)
    if (claimed.round) taken.push(...claimed.round.Inputs.map(idOf))
    return true
  }
  const finish = (): void => {
    const c = docToJson(owner)
    if (c.Status === 'StartingExecution') writeOn(0, { ...without(c, 'Round'), Status: 'Idle', Disposition: 'Completed' })
  }
  for (const o of ops) {
    if (o.kind === 'post') {
      const id = `m${++n}`
      const doc = copies[o.on]!
      const next = enqueuedContent(T, docToJson(doc), id)
      if (next) writeOn(o.on, next)
      posted.push(id)
    } else if (o.kind === 'claim') claim()
    else if (o.kind === 'finish') finish()
    else if (o.from === o.to) continue
    else if (o.kind === 'relay') relay(o.from, o.to)
    else sync(copies[o.from]!, copies[o.to]!)
  }
  // Every copy's writes reach the owner (the fan-out, or the catch-up from the log); its rounds drain.
  for (let i = 0; i < 10; i++) {
    for (const a of copies) for (const b of copies) if (a !== b) sync(a, b)
    finish()
    if (!claim()) break
    finish()
  }
  for (const a of copies) for (const b of copies) if (a !== b) sync(a, b)
  return { taken, posted, left: roundInputs(T, docToJson(owner)), listed: copies.map((d) => strings(docToJson(d).UserMessageIds).sort()) }
}

describe('[THR26] posted messages across instances\' copies of a thread', () => {
  it('two instances enqueuing at the same moment: both messages are taken, by one round each (the example)', () => {
    const { taken, posted, left, listed } = run([{ kind: 'post', on: 1 }, { kind: 'post', on: 2 }], started)
    expect(posted).toEqual(['m1', 'm2'])
    expect(taken.sort()).toEqual(['m1', 'm2'])
    expect(left).toEqual([])
    expect(listed).toEqual([['m0', 'm1', 'm2'], ['m0', 'm1', 'm2'], ['m0', 'm1', 'm2']])
  })

  it('every posted message is taken by exactly one round, and listed in UserMessageIds, under any interleaving of posts, claims and merges (property)', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 40 }), (ops) => {
        const { taken, posted, left, listed } = run(ops, started)
        expect(left).toEqual([])
        expect([...taken].sort()).toEqual([...posted].sort())
        // The contract's list holds every posted id once the owner has seen them all, on every copy.
        for (const l of listed) expect(l).toEqual(['m0', ...posted].sort())
      }),
      { seed: SEED, numRuns: 300 },
    )
  })

  it('a thread made before the map (no Posted): a post on one copy at a time is never lost, its first round makes the map, and the claim lists the map\'s ids in UserMessageIds', () => {
    const old = (): Y.Doc => {
      const doc = new Y.Doc()
      write(doc, { Agent: { Kind: 'builtin' }, Status: 'Idle', Messages: [], UserMessageIds: [], IngestedMessageIds: [], PendingUserMessages: [] })
      return doc
    }
    const { taken, posted } = run([{ kind: 'post', on: 1 }, { kind: 'sync', from: 1, to: 2 }, { kind: 'post', on: 2 }, { kind: 'claim' }], old)
    expect(taken.sort()).toEqual(posted.sort())
    // Its first round gives it the map (here one enqueued before the map existed): from then on
    // two enqueues at once both stay.
    const owner = old()
    write(owner, { ...docToJson(owner), UserMessageIds: ['m1'], PendingUserMessages: [`${T}/m1`], HasPending: true })
    write(owner, claimedContent(T, docToJson(owner), new Date(0).toISOString())!.content)
    const [one, two] = [1001, 1002].map((id) => {
      const d = new Y.Doc()
      d.clientID = id
      Y.applyUpdate(d, Y.encodeStateAsUpdate(owner))
      return d
    }) as [Y.Doc, Y.Doc]
    write(one, enqueuedContent(T, docToJson(one), 'm2')!)
    write(two, enqueuedContent(T, docToJson(two), 'm3')!)
    sync(one, two)
    sync(two, one)
    expect(roundInputs(T, docToJson(one)).sort()).toEqual([`${T}/m2`, `${T}/m3`])
    expect(docToJson(two)).toEqual(docToJson(one))
    const doc = new Y.Doc()
    write(doc, { Status: 'Idle', UserMessageIds: ['a'], Posted: { a: 0, b: 1 } })
    const claimed = claimedContent(T, docToJson(doc), new Date(0).toISOString())
    expect(strings(claimed?.content.UserMessageIds)).toEqual(['a', 'b'])
    expect(claimed?.round?.Inputs).toEqual([`${T}/a`, `${T}/b`])
  })
})
