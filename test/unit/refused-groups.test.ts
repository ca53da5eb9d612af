import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { groupRefused } from '../../web/store/refused.js'
import type { OutboxRow } from '../../web/store/db.js'
import { textBaseOf } from '../../web/sync/text-rebase.js'

const row = (id: number, path: string, patch: Record<string, unknown>, code: string, status: 'refused' | 'pending' = 'refused'): OutboxRow => ({
  id,
  path,
  patch: patch as OutboxRow['patch'],
  update: new Uint8Array(),
  status,
  code,
  at: new Date(1_700_000_000_000 + id).toISOString(),
})

describe('[WEB11] refused edits grouped per node and field', () => {
  it('[WEB11] 13 keystrokes are one entry with the final text and the first refusal\'s cause', () => {
    const rows = Array.from({ length: 13 }, (_, i) => row(i + 1, 'S/doc', { Caption: 'c0 typed'.slice(0, i % 8) + String(i) }, i === 0 ? 'forbidden' : 'invalid_update'))
    rows.push(row(14, 'S/doc', { Title: 't' }, 'invalid_update'))
    const groups = groupRefused(rows)
    expect(groups).toHaveLength(2)
    expect(groups[0]).toMatchObject({ path: 'S/doc', field: 'Caption', value: rows[12]!.patch.Caption, code: 'forbidden' })
    expect(groups[0]!.ids).toHaveLength(13)
    // Title only followed the refused Caption edit: it is told that cause.
    expect(groups[1]).toMatchObject({ field: 'Title', code: 'forbidden' })
  })

  it('[WEB11] property: one group per (node, field) touched by a refused edit, holding the last value, every refused id in it; pending rows never appear', () => {
    const arbRow = fc.record({
      path: fc.constantFrom('A', 'A/b', 'C'),
      fields: fc.uniqueArray(fc.constantFrom('x', 'y', 'z'), { minLength: 1, maxLength: 3 }),
      value: fc.string({ maxLength: 5 }),
      refused: fc.boolean(),
    })
    fc.assert(
      fc.property(fc.array(arbRow, { maxLength: 40 }), (specs) => {
        const rows = specs.map((s, i) => row(i + 1, s.path, Object.fromEntries(s.fields.map((f) => [f, `${s.value}${i}`])), 'forbidden', s.refused ? 'refused' : 'pending'))
        const groups = groupRefused(rows)
        const expected = new Map<string, { value: unknown; ids: number[] }>()
        for (const r of rows) {
          if (r.status !== 'refused') continue
          for (const [f, v] of Object.entries(r.patch)) {
            const k = `${r.path}\n${f}`
            const e = expected.get(k) ?? { value: null, ids: [] }
            e.value = v
            e.ids.push(r.id!)
            expected.set(k, e)
          }
        }
        // Without a base (a value replaced whole) every edit of a field carries on its one run.
        const fieldKey = (g: { path: string; field: string }) => `${g.path}\n${g.field}`
        expect(new Set(groups.map(fieldKey))).toEqual(new Set(expected.keys()))
        expect(new Set(groups.map((g) => g.key)).size).toBe(groups.length)
        for (const g of groups) expect({ value: g.value, ids: g.ids }).toEqual(expected.get(fieldKey(g)))
      }),
      { seed: 1516, numRuns: 200 },
    )
  })
})

describe('[WEB80] a refused run of a field never hides an earlier one', () => {
  /** A keystroke of `field`: from `before` to `after`, its base kept as the replica keeps it. */
  const keystroke = (id: number, before: string, after: string, code = 'forbidden'): OutboxRow => ({
    ...row(id, 'S/doc', { Caption: after }, code),
    base: { Caption: textBaseOf(after, before) },
  })

  it('[WEB80] property: runs typed on texts that did not hold the last refused one are entries of their own, each with its final text; one run is one entry even with others typing between', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ start: fc.string({ maxLength: 4 }), typed: fc.string({ minLength: 1, maxLength: 6 }) }), { minLength: 1, maxLength: 5 }), (runs) => {
        const rows: OutboxRow[] = []
        const finals: string[] = []
        let last: string | null = null
        for (const [i, run] of runs.entries()) {
          // Each run starts from the server's text (the doc rebuilt), marked so it never holds the last run's text.
          let value = `#${i}:${run.start}`
          if (last !== null && value.includes(last)) return
          for (const ch of run.typed) {
            const before = value
            value += ch
            rows.push(keystroke(rows.length + 1, before, value))
          }
          finals.push(value)
          last = value
        }
        const groups = groupRefused(rows)
        expect(groups.map((g) => g.value)).toEqual(finals)
        expect(groups.map((g) => g.ids.length)).toEqual(runs.map((r) => Array.from(r.typed).length))
      }),
      { seed: 80, numRuns: 200 },
    )
  })

  it('[WEB80] others typing between two keystrokes of a run keep it one entry', () => {
    const rows = [keystroke(1, 'ab', 'abX'), keystroke(2, 'Q abX', 'Q abXY'), keystroke(3, 'Q abXY', 'Q abXYZ')]
    const groups = groupRefused(rows)
    expect(groups.map((g) => [g.value, g.ids])).toEqual([['Q abXYZ', [1, 2, 3]]])
  })

  it('[WEB80] a second run on the rebuilt text is its own entry, the first one kept', () => {
    const rows = [keystroke(1, 'base', 'base a'), keystroke(2, 'base a', 'base ab'), keystroke(3, 'base', 'base c', 'invalid_update')]
    const groups = groupRefused(rows)
    expect(groups.map((g) => [g.value, g.ids, g.code])).toEqual([
      ['base ab', [1, 2], 'forbidden'],
      ['base c', [3], 'forbidden'],
    ])
  })
})
