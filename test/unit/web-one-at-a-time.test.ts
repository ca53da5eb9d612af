import { describe, expect, it, vi } from 'vitest'
import { oneAtATime } from '../../web/sync/one-at-a-time.js'

describe('oneAtATime', () => {
  it('[WEB105] runs one read at a time; asks while one runs make exactly one more after it', async () => {
    const gates: (() => void)[] = []
    let runs = 0
    let settled = 0
    const soon = oneAtATime(async () => {
      runs++
      await new Promise<void>((resolve) => gates.push(resolve))
      settled++
    })
    soon()
    soon()
    soon()
    expect(runs).toBe(1)
    gates.shift()!()
    await vi.waitFor(() => expect(runs).toBe(2))
    gates.shift()!()
    await vi.waitFor(() => expect(settled).toBe(2))
    // The run's end is its promise's: the next ask after it is a run of its own.
    await new Promise<void>((resolve) => setTimeout(resolve, 0)) // the run's `finally` settles (microtasks)
    expect(runs).toBe(2)
    soon()
    expect(runs).toBe(3)
    gates.shift()!()
  })
})
