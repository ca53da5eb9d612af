import type { Logger } from 'pino'
import { every, type CancelTimer, type Clock } from './clock.js'

/**
 * The paged reconciler (issue 17): the safety net that finds work the live path missed (a dropped
 * event, a crash, a lease or retry whose time came). A pass walks the work in pages by key
 * (`page(after, limit)`, keyset paging, never "everything at once"), hands each item to `each`,
 * and drops the page before reading the next. It runs at boot and every `intervalMs` on the
 * injected clock; passes NEVER overlap: asking while one runs marks one more pass to follow it.
 */
export interface ReconcilerOptions<T> {
  /** Up to `limit` items whose key sorts after `after` (undefined: from the start), in key order. */
  page: (after: string | undefined, limit: number) => Promise<readonly T[]>
  keyOf: (item: T) => string
  each: (item: T) => Promise<void> | void
  pageSize?: number
  /** null: at boot and on request only. */
  intervalMs: number | null
  clock: Clock
  log: Logger
  what: string
}

export const RECONCILE_PAGE = 500

export class Reconciler<T> {
  private running: Promise<void> | null = null
  private again = false
  private cancelTick: CancelTimer | null = null
  private stopped = false
  /** Passes completed (tests, diagnostics). */
  passes = 0

  constructor(private readonly opts: ReconcilerOptions<T>) {}

  /** Runs the boot pass, then arms the periodic one. */
  async start(): Promise<void> {
    await this.run()
    if (this.opts.intervalMs !== null && !this.stopped) {
      this.cancelTick = every(this.opts.clock, this.opts.intervalMs, () => void this.run())
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.cancelTick?.()
    await this.running
  }

  get busy(): boolean {
    return this.running !== null
  }

  /** Resolves once no pass is under way or asked for. */
  async idle(): Promise<void> {
    while (this.running) await this.running
  }

  /** A pass now, or right after the one under way (never two at once). Resolves when it is done. */
  run(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    if (this.running) {
      this.again = true
      return this.running
    }
    const pass: Promise<void> = this.pass()
      .catch((err: unknown) => this.opts.log.warn({ err }, `${this.opts.what}: reconcile failed; the next pass retries`))
      .finally(() => {
        this.running = null
        this.passes++
        if (this.again && !this.stopped) {
          this.again = false
          void this.run()
        }
      })
    this.running = pass
    return pass
  }

  private async pass(): Promise<void> {
    const limit = this.opts.pageSize ?? RECONCILE_PAGE
    let after: string | undefined
    for (;;) {
      if (this.stopped) return
      const page = await this.opts.page(after, limit)
      for (const item of page) {
        if (this.stopped) return
        try {
          await this.opts.each(item)
        } catch (err) {
          this.opts.log.warn({ err, key: this.opts.keyOf(item) }, `${this.opts.what}: reconcile of one item failed`)
        }
      }
      if (page.length < limit) return
      after = this.opts.keyOf(page[page.length - 1]!)
    }
  }
}

/**
 * Several paged sources as one, walked in turn (an engine's work lies under a few indexed
 * conditions, e.g. `Status = Running` and `RequestedStatus = Cancelled`): the key of an item is
 * its source's number and its own key, so keyset paging resumes in the right source.
 */
export function concatPages<T extends { path: string }>(
  sources: ReadonlyArray<(after: string | undefined, limit: number) => Promise<readonly T[]>>,
): (after: string | undefined, limit: number) => Promise<Array<{ source: number; row: T }>> {
  return async (after, limit) => {
    let source = 0
    let inner: string | undefined
    if (after !== undefined) {
      const cut = after.indexOf(':')
      source = Number(after.slice(0, cut))
      inner = after.slice(cut + 1)
    }
    const out: Array<{ source: number; row: T }> = []
    for (; source < sources.length && out.length < limit; source++, inner = undefined) {
      const page = await sources[source]!(inner, limit - out.length)
      for (const row of page) out.push({ source, row })
      if (page.length === limit - out.length + page.length && out.length >= limit) break
    }
    return out
  }
}

/** The key of an item of `concatPages`. */
export function pageKey(item: { source: number; row: { path: string } }): string {
  return `${item.source}:${item.row.path}`
}
