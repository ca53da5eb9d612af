import { createHash } from 'node:crypto'
import type { Message } from 'esbuild'
import type { Observable } from 'rxjs'
import type { Logger } from 'pino'
import { SYSTEM, isReservedSegment, lastSegment, parentPath, type JsonObject, type NodePath } from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import { FeedFollower, KeyedWorker, RECONCILE_PAGE, claim, lightPage, realClock, type CancelTimer, type Clock } from '../kit/index.js'
import { reRequestInterrupted } from './control-plane.js'
import { cutText, toStorableText } from '../../../shared/storable-text.js'

/**
 * [ACT16] The syntax check of Code nodes, the seed's owner-state pattern where the owner is not
 * the executor: the owner state is `{code}/_Check` (a CodeCheck node, written by this engine
 * only), the work runs in esbuild's service (a child process). A Source change makes the check
 * stale; the engine claims it (Pending/stale → Checking, inside `update`), asks esbuild, and
 * writes Passed/Failed with the errors only if the claim still stands for the same Source. At boot
 * a check still `Checking` was interrupted (nothing is in flight in a fresh process): it is
 * re-requested (`Checking → Pending`) and dispatched again.
 */

export const CHECK_SEGMENT = '_Check'

export type CheckStatus = 'Pending' | 'Checking' | 'Passed' | 'Failed'

export interface CheckError {
  Line: number
  Column: number
  Text: string
}

export function checkPathOf(codePath: NodePath): NodePath {
  return `${codePath}/${CHECK_SEGMENT}` as NodePath
}

export function sourceHash(source: string): string {
  return createHash('sha256').update(source).digest('hex').slice(0, 32)
}

/** What esbuild says of a script body (the body of an async function, as the runner wraps it). */
export async function checkSource(source: string, language: 'javascript' | 'typescript'): Promise<CheckError[]> {
  const wrapped = `async function __weft_run() {\n${source}\n}`
  // [PROD3] esbuild loads with the first check (a Code node saved), not at start.
  const { transform } = await import('esbuild')
  try {
    await transform(wrapped, { loader: language === 'typescript' ? 'ts' : 'js', target: 'es2020', logLevel: 'silent' })
    return []
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors
    if (!Array.isArray(errors) || errors.length === 0) return [{ Line: 1, Column: 1, Text: toStorableText(cutText(String((err as Error).message), 500)) }]
    return errors.slice(0, 20).map((e) => ({
      // Line 1 of the wrapped text is the wrapper; columns are 0-based in esbuild.
      Line: Math.max(1, (e.location?.line ?? 2) - 1),
      Column: (e.location?.column ?? 0) + 1,
      Text: toStorableText(cutText(e.text, 500)),
    }))
  }
}

const MAX_SOURCE_CHECKED = 1024 * 1024

/**
 * Built from the kit (issue 17): the feed follower (boot-then-live, gap replay) and a debounce on
 * the injected clock kick a keyed worker, one check per Code node at a time (a change meanwhile
 * re-runs it once the check settles); the claims are the kit's `claim`.
 */
export class CodeCheckEngine {
  private readonly timers = new Map<NodePath, CancelTimer>()
  private timerWaiters: Array<() => void> = []
  private readonly worker: KeyedWorker<NodePath>
  private readonly feed: FeedFollower
  private readonly clock: Clock
  private stopped = false

  constructor(
    private readonly nodes: NodeApi,
    private readonly log: Logger,
    private readonly opts: { debounceMs: number; signal: AbortSignal; clock?: Clock; changes$?: Observable<LiveChange> },
  ) {
    this.clock = opts.clock ?? realClock
    this.worker = new KeyedWorker<NodePath>((code) => this.check(code), {
      concurrency: 4,
      onError: (err, path) => this.log.error({ err, path }, 'code check failed; the next change retries'),
    })
    this.feed = new FeedFollower({
      nodes,
      ...(opts.changes$ ? { changes$: opts.changes$ } : {}),
      interested: (r) => r.kind !== 'Deleted' && (r.nodeType === 'Code' || r.nodeType === 'CodeCheck'),
      onChange: (c) => {
        if (c.nodeType === 'Code' && c.node) this.schedule(c.path, this.opts.debounceMs)
        // A re-request (boot's flip, or a Pending written by anyone with the right) is dispatched at once.
        else if (c.nodeType === 'CodeCheck' && c.node?.content.Status === 'Pending' && lastSegment(c.path) === CHECK_SEGMENT) {
          const code = parentPath(c.path)
          if (code) this.schedule(code, 0)
        }
      },
      clock: this.clock,
      log,
      what: 'code check',
    })
  }

  async start(): Promise<void> {
    await this.feed.start(async () => {
      // The owner's own state, first: a check left Checking by the previous process is asked again.
      await reRequestInterrupted(this.nodes, { nodeType: 'CodeCheck', field: 'Status', inProgress: 'Checking', requested: 'Pending' }, { log: this.log, signal: this.opts.signal })
      // Paged and light: the pending checks' paths, never their content.
      const page = lightPage(this.nodes, { nodeType: 'CodeCheck', where: { Status: 'Pending' } }, [])
      let after: string | undefined
      for (;;) {
        const rows = await page(after, RECONCILE_PAGE)
        for (const r of rows) {
          const code = parentPath(r.path)
          if (code) this.schedule(code, 0)
        }
        if (rows.length < RECONCILE_PAGE) break
        after = rows[rows.length - 1]!.path
      }
    })
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.feed.stop()
    for (const cancel of this.timers.values()) cancel()
    this.timers.clear()
    this.wakeTimerWaiters()
    await this.worker.stop()
  }

  /** Resolves once no check is scheduled or running (tests): woken by the work itself, no polling. */
  async settled(): Promise<void> {
    for (;;) {
      if (this.timers.size > 0) await new Promise<void>((resolve) => this.timerWaiters.push(resolve))
      await this.feed.idle()
      await this.worker.idle()
      if (this.timers.size === 0 && this.worker.pending === 0) return
    }
  }

  private wakeTimerWaiters(): void {
    const waiters = this.timerWaiters
    this.timerWaiters = []
    for (const w of waiters) w()
  }

  private schedule(codePath: NodePath, delayMs: number): void {
    if (this.stopped || isReservedSegment(lastSegment(codePath))) return
    this.timers.get(codePath)?.()
    this.timers.set(
      codePath,
      this.clock.setTimeout(() => {
        this.timers.delete(codePath)
        this.worker.kick(codePath)
        if (this.timers.size === 0) this.wakeTimerWaiters()
      }, delayMs),
    )
  }

  private async check(codePath: NodePath): Promise<void> {
    const code = await this.nodes.get(SYSTEM, codePath)
    if (!code || code.nodeType !== 'Code') return
    const source = typeof code.content.Source === 'string' ? code.content.Source : ''
    const language = code.content.Language === 'typescript' ? 'typescript' : 'javascript'
    const hash = sourceHash(`${language}\n${source}`)
    const checkPath = checkPathOf(codePath)
    // The claim is the re-check inside update: stale (another Source) or re-requested.
    const claimed = await claim(this.nodes, checkPath, {
      when: (cur) => !(cur && cur.content.SourceHash === hash && cur.content.Status !== 'Pending'),
      write: (cur) => {
        const c = cur?.content
        const content: JsonObject = { Status: 'Checking', SourceHash: hash, Errors: (c?.Errors as JsonObject[] | undefined) ?? [], CheckedAt: (c?.CheckedAt as string | undefined) ?? null }
        return { nodeType: 'CodeCheck', name: 'Check', content }
      },
    })
    if (!claimed.claimed) return
    const errors: CheckError[] =
      source.length > MAX_SOURCE_CHECKED ? [{ Line: 1, Column: 1, Text: `The source is over ${MAX_SOURCE_CHECKED / 1024} KB and was not checked.` }] : await checkSource(source, language)
    await claim(this.nodes, checkPath, {
      // Still our claim for this Source: a newer claim, a re-request or a delete wins.
      when: (cur) => cur !== null && cur.content.Status === 'Checking' && cur.content.SourceHash === hash,
      write: () => ({
        nodeType: 'CodeCheck',
        name: 'Check',
        content: { Status: errors.length === 0 ? 'Passed' : 'Failed', SourceHash: hash, Errors: errors as unknown as JsonObject[], CheckedAt: new Date(this.clock.now()).toISOString() },
      }),
    })
    // The Source moved on while esbuild ran: check again.
    const latest = await this.nodes.get(SYSTEM, codePath)
    if (!latest || latest.nodeType !== 'Code') {
      // Deleted while esbuild ran: the check has no owner left.
      await this.nodes.delete(SYSTEM, checkPath, 'engine').catch(() => undefined)
    } else {
      const now = `${latest.content.Language === 'typescript' ? 'typescript' : 'javascript'}\n${typeof latest.content.Source === 'string' ? latest.content.Source : ''}`
      // A kick from inside the job marks it dirty: it runs once more after this one.
      if (sourceHash(now) !== hash) this.worker.kick(codePath)
    }
  }
}
