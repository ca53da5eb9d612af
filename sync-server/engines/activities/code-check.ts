import { createHash } from 'node:crypto'
import { transform, type Message } from 'esbuild'
import { Subscription } from 'rxjs'
import type { Logger } from 'pino'
import { SYSTEM, isReservedSegment, lastSegment, parentPath, type JsonObject, type MeshNode, type NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { reRequestInterrupted } from './control-plane.js'

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
  try {
    await transform(wrapped, { loader: language === 'typescript' ? 'ts' : 'js', target: 'es2020', logLevel: 'silent' })
    return []
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors
    if (!Array.isArray(errors) || errors.length === 0) return [{ Line: 1, Column: 1, Text: String((err as Error).message).slice(0, 500) }]
    return errors.slice(0, 20).map((e) => ({
      // Line 1 of the wrapped text is the wrapper; columns are 0-based in esbuild.
      Line: Math.max(1, (e.location?.line ?? 2) - 1),
      Column: (e.location?.column ?? 0) + 1,
      Text: e.text.slice(0, 500),
    }))
  }
}

const MAX_SOURCE_CHECKED = 1024 * 1024

export class CodeCheckEngine {
  private readonly feed = new Subscription()
  private readonly timers = new Map<NodePath, NodeJS.Timeout>()
  /** One check per Code node at a time; a change meanwhile re-runs it once the check settles. */
  private readonly inFlight = new Map<NodePath, Promise<void>>()
  private readonly again = new Set<NodePath>()
  private stopped = false

  constructor(
    private readonly nodes: NodeApi,
    private readonly log: Logger,
    private readonly opts: { debounceMs: number; signal: AbortSignal },
  ) {}

  async start(): Promise<void> {
    this.feed.add(
      this.nodes.changes$.subscribe((c) => {
        if (this.stopped) return
        if (c.nodeType === 'Code' && c.node) this.schedule(c.path, this.opts.debounceMs)
        // A re-request (boot's flip, or a Pending written by anyone with the right) is dispatched at once.
        else if (c.nodeType === 'CodeCheck' && c.node?.content.Status === 'Pending' && lastSegment(c.path) === CHECK_SEGMENT) {
          const code = parentPath(c.path)
          if (code) this.schedule(code, 0)
        }
      }),
    )
    // The owner's own state, first: a check left Checking by the previous process is asked again.
    await reRequestInterrupted(this.nodes, { nodeType: 'CodeCheck', field: 'Status', inProgress: 'Checking', requested: 'Pending' }, { log: this.log, signal: this.opts.signal })
    const pending = await this.nodes.query(SYSTEM, { nodeType: 'CodeCheck', where: { Status: 'Pending' }, limit: Number.MAX_SAFE_INTEGER })
    for (const n of pending) {
      const code = parentPath(n.path)
      if (code) this.schedule(code, 0)
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    this.feed.unsubscribe()
    for (const t of this.timers.values()) clearTimeout(t)
    this.timers.clear()
    await Promise.allSettled([...this.inFlight.values()])
  }

  /** Settles when every scheduled and running check has finished (tests). */
  async idle(): Promise<void> {
    while (this.timers.size > 0 || this.inFlight.size > 0) {
      await Promise.allSettled([...this.inFlight.values()])
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  private schedule(codePath: NodePath, delayMs: number): void {
    if (this.stopped || isReservedSegment(lastSegment(codePath))) return
    const prev = this.timers.get(codePath)
    if (prev) clearTimeout(prev)
    const t = setTimeout(() => {
      this.timers.delete(codePath)
      this.dispatch(codePath)
    }, delayMs)
    t.unref()
    this.timers.set(codePath, t)
  }

  private dispatch(codePath: NodePath): void {
    if (this.stopped) return
    if (this.inFlight.has(codePath)) {
      this.again.add(codePath)
      return
    }
    const p = this.check(codePath)
      .catch((err: unknown) => this.log.error({ err, path: codePath }, 'code check failed; the next change retries'))
      .finally(() => {
        this.inFlight.delete(codePath)
        if (this.again.delete(codePath)) this.dispatch(codePath)
      })
    this.inFlight.set(codePath, p)
  }

  private async check(codePath: NodePath): Promise<void> {
    const code = await this.nodes.get(SYSTEM, codePath)
    if (!code || code.nodeType !== 'Code') return
    const source = typeof code.content.Source === 'string' ? code.content.Source : ''
    const language = code.content.Language === 'typescript' ? 'typescript' : 'javascript'
    const hash = sourceHash(`${language}\n${source}`)
    const checkPath = checkPathOf(codePath)
    let claimed = false
    // The claim is the re-check inside update: stale (another Source) or re-requested.
    await this.nodes.update(
      SYSTEM,
      checkPath,
      (cur) => {
        const c = cur?.content
        if (c && c.SourceHash === hash && c.Status !== 'Pending') return undefined
        claimed = true
        const content: JsonObject = { Status: 'Checking', SourceHash: hash, Errors: (c?.Errors as JsonObject[] | undefined) ?? [], CheckedAt: (c?.CheckedAt as string | undefined) ?? null }
        return { nodeType: 'CodeCheck', name: 'Check', content }
      },
      'engine',
    )
    if (!claimed) return
    const errors: CheckError[] =
      source.length > MAX_SOURCE_CHECKED ? [{ Line: 1, Column: 1, Text: `The source is over ${MAX_SOURCE_CHECKED / 1024} KB and was not checked.` }] : await checkSource(source, language)
    await this.nodes.update(
      SYSTEM,
      checkPath,
      (cur: MeshNode | null) => {
        // Still our claim for this Source: a newer claim, a re-request or a delete wins.
        if (!cur || cur.content.Status !== 'Checking' || cur.content.SourceHash !== hash) return undefined
        const content: JsonObject = { Status: errors.length === 0 ? 'Passed' : 'Failed', SourceHash: hash, Errors: errors as unknown as JsonObject[], CheckedAt: new Date().toISOString() }
        return { nodeType: 'CodeCheck', name: 'Check', content }
      },
      'engine',
    )
    // The Source moved on while esbuild ran: check again.
    const latest = await this.nodes.get(SYSTEM, codePath)
    if (!latest || latest.nodeType !== 'Code') {
      // Deleted while esbuild ran: the check has no owner left.
      await this.nodes.delete(SYSTEM, checkPath, 'engine').catch(() => undefined)
    } else {
      const now = `${latest.content.Language === 'typescript' ? 'typescript' : 'javascript'}\n${typeof latest.content.Source === 'string' ? latest.content.Source : ''}`
      if (sourceHash(now) !== hash) this.again.add(codePath)
    }
  }
}
