import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { storableText, toStorableText, type NodePath } from '../../shared/index.js'
import { Pacer } from '../../sync-server/engines/kit/index.js'
import { CellWriter } from '../../sync-server/engines/threads/cell-writer.js'

/** A response cell: the Text of every write it took. */
function cell(fail?: (text: string) => boolean) {
  const writes: string[] = []
  const nodes = {
    patch: async (_p: unknown, _path: string, patch: { Text?: string }) => {
      const text = String(patch.Text)
      if (fail?.(text)) throw new Error('refused')
      writes.push(text)
      return {} as never
    },
  }
  return { writes, nodes: nodes as never }
}

/** `text` cut into tokens at the given places (anywhere: inside a surrogate pair too). */
function tokens(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)
  const out: string[] = []
  let from = 0
  for (const c of at) {
    out.push(text.slice(from, c))
    from = c
  }
  out.push(text.slice(from))
  return out
}

describe('[THR24] the response cell as a round streams it', () => {
  it('seeded property: a stream cut anywhere (one emoji in two deltas) writes only storable text, and ends as the whole answer', async () => {
    const piece = fc.oneof(fc.constantFrom('😀', '日本語', 'a', ' ', '👍🏽', '\u0000', '\ud800'), fc.string({ maxLength: 4 }))
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { minLength: 1, maxLength: 12 }), fc.array(fc.nat(), { maxLength: 8 }), async (pieces, cuts) => {
        const answer = pieces.join('')
        const { writes, nodes } = cell((t) => !storableText(t))
        const w = new CellWriter(nodes, 'S/t/_r.a' as NodePath, '', new Pacer(4))
        for (const t of tokens(answer, cuts)) await w.emit(t)
        await w.end()
        for (const t of writes) expect(storableText(t)).toBe(true)
        expect(writes.at(-1) ?? '').toBe(toStorableText(answer))
      }),
      { seed: Number(process.env.CELL_WRITER_SEED ?? 24), numRuns: 300 },
    )
  })

  it('a resumed round that brings nothing new leaves the cell as it was', async () => {
    const { writes, nodes } = cell()
    const w = new CellWriter(nodes, 'S/t/_r.a' as NodePath, 'kept', new Pacer(4))
    await w.emit('ke')
    await w.end()
    expect(writes).toEqual([])
  })
})
