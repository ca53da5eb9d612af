import { describe, expect, it } from 'vitest'
import { GroupCommitter, type ItemResult } from '../../sync-server/storage/group-commit.js'

/**
 * The batching logic alone (the adapters' own tests run it against real SQLite and PostgreSQL):
 * a writer whose batches the test completes by hand.
 */
function controlledWriter() {
  const calls: { batch: readonly string[]; finish: (error?: Error) => void }[] = []
  const write = (batch: readonly string[]) =>
    new Promise<ItemResult<string>[]>((resolve, reject) => {
      calls.push({
        batch,
        finish: (error) => (error ? reject(error) : resolve(batch.map((v) => ({ ok: true as const, value: `${v}!` })))),
      })
    })
  return { calls, write }
}

const turn = () => new Promise((r) => setImmediate(r))

describe('group commit', () => {
  it('one batch in flight by default: the next gathers until it is done', async () => {
    const w = controlledWriter()
    const gc = new GroupCommitter(w.write, 100)
    const a = gc.submit('a')
    const b = gc.submit('b')
    await turn()
    const c = gc.submit('c')
    await turn()
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b']])
    w.calls[0]!.finish()
    await expect(Promise.all([a, b])).resolves.toEqual(['a!', 'b!'])
    await turn()
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b'], ['c']])
    w.calls[1]!.finish()
    await expect(c).resolves.toBe('c!')
  })

  it('two in flight: the second batch goes while the first commits; results and failures stay per batch, in order', async () => {
    const w = controlledWriter()
    const gc = new GroupCommitter(w.write, 100, 2)
    const first = [gc.submit('a'), gc.submit('b')]
    await turn()
    const second = [gc.submit('c')]
    await turn()
    const third = gc.submit('d')
    await turn()
    // Two batches handed over, the third gathers.
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b'], ['c']])
    const settled: string[] = []
    void Promise.allSettled(first).then(() => settled.push('first'))
    void Promise.allSettled(second).then(() => settled.push('second'))
    w.calls[0]!.finish(new Error('disk full'))
    w.calls[1]!.finish()
    await expect(first[0]).rejects.toThrow('disk full')
    await expect(first[1]).rejects.toThrow('disk full')
    await expect(second[0]).resolves.toBe('c!')
    expect(settled).toEqual(['first', 'second'])
    await turn()
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b'], ['c'], ['d']])
    let drained = false
    const drain = gc.drain().then(() => (drained = true))
    await turn()
    expect(drained).toBe(false)
    w.calls[2]!.finish()
    await drain
    await expect(third).resolves.toBe('d!')
  })

  it('a queue longer than one batch fills every free slot at once', async () => {
    const w = controlledWriter()
    const gc = new GroupCommitter(w.write, 2, 2)
    const all = ['a', 'b', 'c', 'd', 'e'].map((v) => gc.submit(v))
    await turn()
    await turn()
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b'], ['c', 'd']])
    w.calls[0]!.finish()
    w.calls[1]!.finish()
    await turn()
    await turn()
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b'], ['c', 'd'], ['e']])
    w.calls[2]!.finish()
    await expect(Promise.all(all)).resolves.toEqual(['a!', 'b!', 'c!', 'd!', 'e!'])
  })

  it('a queue that reaches eagerAt goes to the writer at once, within the same turn', async () => {
    const w = controlledWriter()
    const gc = new GroupCommitter(w.write, 10, 2, 3)
    const all = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((v) => gc.submit(v))
    // No turn has passed: the first two full batches are already with the writer.
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f']])
    w.calls[0]!.finish()
    await turn()
    await turn()
    // The rest goes when a slot frees, in order.
    expect(w.calls.map((x) => x.batch)).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g', 'h']])
    w.calls[1]!.finish()
    w.calls[2]!.finish()
    await expect(Promise.all(all)).resolves.toEqual(['a!', 'b!', 'c!', 'd!', 'e!', 'f!', 'g!', 'h!'])
    await gc.drain()
  })

  it('[STO6] the queue is bounded: submissions past maxQueued wait in order, none is dropped', async () => {
    const w = controlledWriter()
    const gc = new GroupCommitter(w.write, 2, 1, 2, 4)
    const all = Array.from({ length: 10 }, (_, i) => gc.submit(`v${i}`))
    expect(gc.queued).toBeLessThanOrEqual(4)
    expect(gc.pending).toBe(10 - w.calls.reduce((n, c) => n + c.batch.length, 0))
    for (let round = 0; round < 10 && w.calls.some((c) => c); round++) {
      await turn()
      expect(gc.queued).toBeLessThanOrEqual(4)
      const open = w.calls.at(-1)
      open?.finish()
      await turn()
    }
    await expect(Promise.all(all)).resolves.toEqual(Array.from({ length: 10 }, (_, i) => `v${i}!`))
    expect(w.calls.flatMap((c) => c.batch)).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`))
    await gc.drain()
  })
})
