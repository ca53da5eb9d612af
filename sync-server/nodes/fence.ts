import { AsyncLocalStorage } from 'node:async_hooks'

/**
 * [SCALE7] Whether the lease an engine's write runs under is still held (cluster/engine-owner.ts
 * sets it around every write of a fenced engine). A write the write path makes once more after
 * waiting (a catch-up) checks it again first: the lease may have been lost meanwhile.
 */
export const writeFence = new AsyncLocalStorage<() => boolean>()
