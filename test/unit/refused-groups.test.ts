import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { groupRefused } from '../../web/store/refused.js'
import type { OutboxRow } from '../../web/store/db.js'

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
        expect(new Set(groups.map((g) => g.key))).toEqual(new Set(expected.keys()))
        for (const g of groups) expect({ value: g.value, ids: g.ids }).toEqual(expected.get(g.key))
      }),
      { seed: 1516, numRuns: 200 },
    )
  })
})
