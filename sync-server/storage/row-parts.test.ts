import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import type { NodePath } from '../../shared/index.js'
import { RowPartsCache, type RowPart } from './row-parts.js'

const P = 'space/run' as NodePath

/** What the node service sends: grown arrays (owned, tracked by identity) as tails, the rest whole. */
function partsOf(content: Record<string, unknown>, grown: Set<unknown[]>, sent: WeakMap<object, number>): RowPart[] {
  return Object.keys(content).map((key): RowPart => {
    const value = content[key]
    if (Array.isArray(value) && grown.has(value)) {
      const from = Math.min(sent.get(value) ?? 0, value.length)
      sent.set(value, value.length)
      return { key, from, tail: value.slice(from).map((v) => JSON.stringify(v)).join(','), count: value.length }
    }
    return { key, json: JSON.stringify(value) }
  })
}

describe('[ACT12] RowPartsCache: a row written in parts', () => {
  it('continues a grown array from what it kept, and the row is the content', () => {
    const cache = new RowPartsCache()
    const log: unknown[] = []
    const content = { Status: 'Running', Messages: log }
    const sent = new WeakMap<object, number>()
    const grown = new Set([log])
    log.push({ Text: 'a' })
    expect(cache.assemble(P, partsOf(content, grown, sent))).toBe(JSON.stringify(content))
    log.push({ Text: 'b' }, { Text: 'c' })
    content.Status = 'Succeeded'
    const parts = partsOf(content, grown, sent)
    expect(parts[1]).toMatchObject({ from: 1, count: 3, tail: '{"Text":"b"},{"Text":"c"}' })
    expect(cache.assemble(P, parts)).toBe(JSON.stringify(content))
  })

  it('a part continuing an array it does not hold is a miss (the caller rebuilds from the log), and prime resumes', () => {
    const cache = new RowPartsCache()
    expect(cache.assemble(P, [{ key: 'Messages', from: 5, tail: '1', count: 6 }])).toBeNull()
    cache.prime(P, { Messages: [1, 2, 3, 4, 5, 6] }, ['Messages'])
    expect(cache.assemble(P, [{ key: 'Messages', from: 6, tail: '7', count: 7 }])).toBe('{"Messages":[1,2,3,4,5,6,7]}')
    expect(cache.assemble(P, [{ key: 'Messages', from: 3, tail: '4', count: 4 }])).toBeNull()
  })

  it('stays within its bytes: the least recently written path goes first', () => {
    const cache = new RowPartsCache(100)
    const a = 'a/x' as NodePath
    const b = 'b/x' as NodePath
    cache.assemble(a, [{ key: 'L', from: 0, tail: `"${'x'.repeat(60)}"`, count: 1 }])
    cache.assemble(b, [{ key: 'L', from: 0, tail: `"${'y'.repeat(60)}"`, count: 1 }])
    expect(cache.size).toBeLessThanOrEqual(100)
    expect(cache.assemble(a, [{ key: 'L', from: 1, tail: '"z"', count: 2 }])).toBeNull()
    expect(cache.assemble(b, [{ key: 'L', from: 1, tail: '"z"', count: 2 }])).toBe(`{"L":["${'y'.repeat(60)}","z"]}`)
  })

  it('property: whatever is appended, replaced, dropped on the way or evicted, the stored row is JSON.stringify(content)', () => {
    type Op = { t: 'append'; n: number } | { t: 'replace' } | { t: 'field' } | { t: 'flush'; lost: boolean }
    const op = fc.oneof(
      fc.record({ t: fc.constant('append' as const), n: fc.integer({ min: 0, max: 30 }) }),
      fc.record({ t: fc.constant('replace' as const) }),
      fc.record({ t: fc.constant('field' as const) }),
      fc.record({ t: fc.constant('flush' as const), lost: fc.boolean() }),
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.integer({ min: 50, max: 2_000 }), (ops: Op[], maxBytes) => {
        const cache = new RowPartsCache(maxBytes)
        const sent = new WeakMap<object, number>()
        let log: unknown[] = []
        const grown = new Set([log])
        const content: Record<string, unknown> = { Status: 'Running', Messages: log }
        let n = 0
        for (const o of ops) {
          if (o.t === 'append') for (let i = 0; i < o.n; i++) log.push({ Text: `line ${n++}`, At: n })
          else if (o.t === 'replace') {
            log = log.slice(1)
            grown.add(log)
            content.Messages = log
          } else if (o.t === 'field') content.Status = `S${n}`
          else {
            const parts = partsOf(content, grown, sent)
            if (o.lost) continue
            let row = cache.assemble(P, parts)
            if (row === null) {
              cache.prime(P, content, ['Messages'])
              row = JSON.stringify(content)
            }
            expect(row).toBe(JSON.stringify(content))
          }
        }
      }),
      { seed: 1207, numRuns: 300 },
    )
  })
})
