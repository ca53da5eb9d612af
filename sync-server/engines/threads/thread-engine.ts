import { setMaxListeners } from 'node:events'
import { filter, firstValueFrom, takeWhile, type Observable } from 'rxjs'
import type { Logger } from 'pino'
import {
  SYSTEM,
  WeftError,
  isJsonObject,
  isMessageId,
  subscriptionPath,
  tryParseNodePath,
  userPrincipal,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
  type UserId,
} from '../../../shared/index.js'
import type { LiveChange, NodeApi } from '../../nodes/index.js'
import {
  actAs,
  concatPages,
  defineEngine,
  lightPage,
  pageKey,
  request,
  requesterOf,
  Pacer,
  type Clock as KitClock,
  type KitEngine,
  type LightQuerySource,
  type LightRow,
} from '../kit/index.js'
import { builtinAgent, type Agent, type AgentTools, type HistoryEntry, type RoundOutcome, type ToolCallRecord } from './builtin-agent.js'
import { APPROVAL_FIELDS, awaitApproval } from './approvals.js'
import { RoundTools } from './round-tools.js'
import { runActivity } from './script-agent.js'
import { RESTING, claimedContent, idOf, needsDispatch, restingWithInput, roundOf, statusOf, strings, subThreadPath, unchosenBy, without, type Clock, type RoundState } from './model.js'
import { enqueue, postCell, userCell } from './post.js'
import { CellWriter, DEFAULT_MAX_RESPONSE_CHARS } from './cell-writer.js'
import { cutText, toStorableText } from '../../../shared/storable-text.js'

/** The round executors by `Agent.Kind` ([THR10]); a kind with none fails its rounds saying so. */
export type AgentKind = 'builtin' | 'script' | 'llm'
export type AgentSet = Partial<Record<AgentKind, Agent>>

const NO_AGENT: Record<AgentKind, string> = {
  builtin: 'No built-in agent is configured on this server.',
  script: 'No script agent is configured on this server.',
  llm: 'No LLM is configured on this server: set WEFT_LLM_BASE_URL (and WEFT_LLM_MODEL, WEFT_LLM_API_KEY) and restart it.',
}

/** How many earlier messages of the thread an agent is given. */
const HISTORY_CELLS = 50

/** A round of this process: the in-memory half (the thread node stays the source of truth). */
interface LiveRound {
  controller: AbortController
  /** Its sub-threads were asked to cancel (later changes of the thread need nothing more). */
  cancelSent: boolean
}

/** [THR28] The latest change-log records a starting engine looks at again (its predecessor's last moments). */
const BOOT_REPLAY_CHANGES = 10_000

/** What a reconcile pass reads of a thread: its path and the fields that say it needs work. */
const LIGHT_FIELDS = ['Status', 'RequestedStatus', 'HasPending'] as const

const SCAN_PAGE = 500

/**
 * [THR20] Round writes (a response cell's text, the terminal write) admitted per turn of the event
 * loop. A write's synchronous part (Yjs transaction, encoding, commit hand-off) is about a
 * millisecond on a loaded machine: 8 a turn keeps a burst of 1,000 rounds (released together, or
 * woken by one group commit) in stretches of a few ms instead of one block of hundreds.
 */
const ROUND_WRITES_PER_TURN = 8

export interface ThreadEngineOptions {
  /** The engine's clock: reconcile passes, the feed's gap replay, timestamps (kit `Clock`). */
  clock: KitClock
  /** A round's clock (`/sleep`, what agents see); default: made from `clock`. */
  roundClock: Clock
  signal: AbortSignal
  agents?: AgentSet
  /** The change feed (default `nodes.changes$`; the test mesh drops, delays and reorders it). */
  changes$?: Observable<LiveChange>
  /** How often a pass looks for work the feed did not deliver; null = at boot only. */
  reconcileIntervalMs?: number | null
  /** Threads whose state the engine works on at once (claims, cancels, roll-backs; not rounds). */
  concurrency?: number
  /** [THR24] Sub-threads below a thread at most (default 4): a deeper delegation is refused. */
  maxDelegationDepth?: number
  /** [THR24] Characters a response cell's Text may hold (default 1,000,000): past it the round fails. */
  maxResponseChars?: number
}

/** [THR24] A chain of delegations deeper than this is refused (each level is a live round). */
export const DEFAULT_MAX_DELEGATION_DEPTH = 4

/**
 * [THR3]–[THR9] The threads engine: the sole writer of a Thread's round state, built from the
 * engine kit (issue 17, docs/decisions/0007-engine-kit.md) like the activities engine:
 *  - watch: a change of a Thread that needs work (pending input, a cancel request, a round with
 *    no live executor here) kicks its path; a person's own user cell (offline composing) kicks
 *    the cell's path, which `handle` ingests into its thread by id;
 *  - reconcile: light, paged scans of the threads that may need work (StartingExecution,
 *    Executing, HasPending, RequestedStatus Cancelled), at boot and every interval;
 *  - handle(path): reads the thread and does what its state asks, each step a claim (the
 *    re-check inside `update`): cancel, roll back an orphaned claim, resume an orphaned round,
 *    claim pending input into a round. One job per thread at a time (the kit's keyed worker).
 * A round, once claimed, runs outside the worker (it may last minutes): its writes are
 * compare-and-sets on the round it belongs to, so a later handle of the same thread never
 * interferes. No per-thread watcher is held: the feed is the one watcher of every thread.
 */
export class ThreadEngine {
  private readonly rounds = new Map<NodePath, LiveRound>()
  private readonly kit: KitEngine
  private readonly clock: KitClock
  private readonly roundClock: Clock
  private readonly shutdown = new AbortController()
  private readonly work = new Set<Promise<unknown>>()
  private readonly agents: AgentSet
  private readonly pacer = new Pacer(ROUND_WRITES_PER_TURN)
  private readonly maxDepth: number
  private readonly maxResponseChars: number
  private stopping = false
  /** Waiters for `settled()`: resolved when no round is live here. */
  private drainedWaiters: Array<() => void> = []

  constructor(
    private readonly nodes: NodeApi & LightQuerySource,
    private readonly log: Logger,
    opts: ThreadEngineOptions,
  ) {
    this.clock = opts.clock
    this.roundClock = opts.roundClock
    this.agents = opts.agents ?? { builtin: builtinAgent }
    this.maxDepth = opts.maxDelegationDepth ?? DEFAULT_MAX_DELEGATION_DEPTH
    this.maxResponseChars = opts.maxResponseChars ?? DEFAULT_MAX_RESPONSE_CHARS
    setMaxListeners(0, this.shutdown.signal)
    if (opts.signal.aborted) this.shutdown.abort()
    else opts.signal.addEventListener('abort', () => this.shutdown.abort(), { once: true })
    const threads = (where: Record<string, string>) => lightPage(nodes, { nodeType: 'Thread', where }, LIGHT_FIELDS)
    this.kit = defineEngine<{ source: number; row: LightRow }>(
      {
        name: 'threads',
        watch: (c) => this.watchKeys(c),
        replays: (r) => r.kind !== 'Deleted' && (r.nodeType === 'Thread' || (r.nodeType === 'ThreadMessage' && r.kind === 'Created')),
        // [THR28] A new owner looks again at the threads changed just before it took over: a post
        // whose HasPending lost its merge to the claim of the instance that stopped is found
        // there, not only by the thread's next change (the boot pass scans for HasPending).
        bootReplay: BOOT_REPLAY_CHANGES,
        reconcile: {
          // [THR7] Four light, paged scans; none reads a thread's content.
          page: concatPages([threads({ Status: 'StartingExecution' }), threads({ Status: 'Executing' }), threads({ HasPending: 'true' }), threads({ RequestedStatus: 'Cancelled' })]),
          keyOf: pageKey,
          needs: (item) => (this.mayNeedWork(item.row.path, item.row.fields as JsonObject) ? [item.row.path] : []),
          intervalMs: opts.reconcileIntervalMs === undefined ? 30_000 : opts.reconcileIntervalMs,
        },
        handle: (key) => this.drive(key as NodePath),
        concurrency: opts.concurrency ?? 16,
      },
      { nodes, log, clock: this.clock, ...(opts.changes$ ? { changes$: opts.changes$ } : {}) },
    )
  }

  // ---------------------------------------------------------------- lifecycle

  /** [THR7] The feed, then the boot pass; resolves once the work that pass found is handled. */
  async start(): Promise<void> {
    await this.kit.start()
    await this.kit.idle()
  }

  async stop(): Promise<void> {
    if (this.stopping) return
    this.stopping = true
    this.shutdown.abort()
    await this.kit.stop()
    // Live rounds end through the shutdown signal (each round's signal follows it): they stay
    // Executing on the node, resumed by the next boot ([THR7]), never settled as cancelled.
    await Promise.allSettled([...this.work])
  }

  /** Asks for a thread (or a person's own cell) to be looked at. */
  kick(path: NodePath): void {
    this.kit.kick(path)
  }

  /** Resolves once the feed, the reconciler and every job are idle (rounds may still run). */
  idle(): Promise<void> {
    return this.kit.idle()
  }

  /** Resolves once nothing is queued, no job runs and no round is live here. */
  async settled(): Promise<void> {
    await this.kit.idle()
    while (this.rounds.size > 0) {
      await new Promise<void>((resolve) => this.drainedWaiters.push(resolve))
      await this.kit.idle()
    }
  }

  /** A reconcile pass now (tests; the periodic one runs on the clock). */
  reconcileNow(): Promise<void> {
    return this.kit.reconcileNow()
  }

  /** Whether this engine holds work for `path`: a job queued or running, or a live round. */
  isBusy(path: NodePath): boolean {
    return this.kit.worker.isBusy(path) || this.rounds.has(path)
  }

  liveRounds(): NodePath[] {
    return [...this.rounds.keys()]
  }

  private track(p: Promise<unknown>): void {
    const t = p.catch((err: unknown) => this.log.error({ err }, 'thread work failed'))
    this.work.add(t)
    void t.finally(() => this.work.delete(t))
  }

  private endRound(path: NodePath, live: LiveRound): void {
    if (this.rounds.get(path) !== live) return
    this.rounds.delete(path)
    if (this.rounds.size > 0) return
    const waiters = this.drainedWaiters
    this.drainedWaiters = []
    for (const w of waiters) w()
  }

  // ---------------------------------------------------------------- watch

  /** The keys a change concerns (cheap, no reads: it runs for every change of the server). */
  private watchKeys(c: LiveChange): readonly string[] {
    if (this.stopping || !c.node) return []
    if (c.nodeType === 'Thread') return this.mayNeedWork(c.path, c.node.content) ? [c.path] : []
    // [THR1] A person's own cell made on their device (offline composing), ingested by its id. A
    // replayed change (version 0) has lost its author: the ingest is idempotent, so kick it too.
    if (c.nodeType === 'ThreadMessage' && c.kind === 'Created' && (c.by !== 'system' || c.version === 0) && c.node.content.Role === 'user') return [c.path]
    return []
  }

  /** Whether a thread in this state may need this engine (what the feed and the reconciler kick on). */
  private mayNeedWork(path: NodePath, c: JsonObject): boolean {
    const live = this.rounds.get(path)
    if (c.RequestedStatus === 'Cancelled') return !live?.cancelSent
    if (live) return false
    const s = typeof c.Status === 'string' ? c.Status : 'Idle'
    if (s === 'StartingExecution' || s === 'Executing') return true
    return restingWithInput(c)
  }

  // ---------------------------------------------------------------- handle

  /**
   * The one job of a path: reads it and does what its state asks, a step at a time, each a
   * claim; it reads again after a step that changed the thread (a cancel settled with input
   * pending then dispatches), at most a few times: a later change kicks it again anyway.
   */
  private async drive(path: NodePath): Promise<void> {
    for (let step = 0; step < 4 && !this.stopping; step++) {
      const node = await this.nodes.get(SYSTEM, path)
      if (!node) return
      if (node.nodeType === 'ThreadMessage') return this.adopt(path, node)
      if (node.nodeType !== 'Thread') return
      const c = node.content
      const live = this.rounds.get(path)
      if (c.RequestedStatus === 'Cancelled') {
        if (live) return this.cancelLive(path, live)
        if (!(await this.settleCancel(path))) return
        continue
      }
      if (live) return
      const s = statusOf(node)
      if (s === 'StartingExecution') {
        if (!(await this.rollBack(path))) return
        continue
      }
      if (s === 'Executing') return this.resume(path)
      if (needsDispatch(node)) return this.claim(path)
      return
    }
  }

  /** [THR1][THR2] A person's own user cell: ingested into its thread by its id, once. */
  private async adopt(cell: NodePath, node: MeshNode): Promise<void> {
    const id = idOf(cell)
    // A cell the write rule let through is the author's own, with a message id (the rule refuses
    // any other id); one written by system under another id is not ingested.
    if (node.content.Role !== 'user' || !isMessageId(id)) return
    const thread = tryParseNodePath(cell.slice(0, cell.lastIndexOf('/')))
    if (thread) await enqueue(this.nodes, thread, id)
  }

  /**
   * [THR3] The claim: the re-check inside `update` (`claimedContent`) moves Idle|Cancelled with
   * input waiting to StartingExecution and drains EVERY input into the round in that one write;
   * the live round is registered in the same synchronous stretch.
   */
  private async claim(path: NodePath): Promise<void> {
    let live: LiveRound | null = null
    let round: RoundState | null = null
    const at = this.roundClock.now().toISOString()
    try {
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (this.stopping || !cur || cur.nodeType !== 'Thread' || this.rounds.has(path)) return undefined
        // With only stale entries (ids already ingested, merged back in from a concurrent enqueue)
        // they are cleared, and no round starts.
        const claimed = claimedContent(path, cur.content, at)
        if (!claimed) return undefined
        round = claimed.round
        if (round) {
          live = { controller: new AbortController(), cancelSent: false }
          this.rounds.set(path, live)
        }
        return { nodeType: cur.nodeType, name: cur.name, content: claimed.content }
      }, 'engine')
    } catch (err) {
      if (live) this.endRound(path, live)
      throw err
    }
    if (!live || !round) return
    const r: RoundState = round
    const l: LiveRound = live
    try {
      // The one response cell, then StartingExecution → Executing (compare-and-set on the round).
      await this.nodes.update(SYSTEM, r.Response as NodePath, (cur) =>
        cur ? undefined : { nodeType: 'ThreadMessage', name: idOf(r.Response), content: { Role: 'assistant', Author: 'agent', Text: '', CreatedAt: at } },
      'engine')
      let executing = false
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.content.Status !== 'StartingExecution' || roundOf(cur.content)?.Response !== r.Response) return undefined
        executing = true
        return { nodeType: cur.nodeType, name: cur.name, content: { ...cur.content, Status: 'Executing' } }
      }, 'engine')
      if (!executing) return this.endRound(path, l)
    } catch (err) {
      // Left StartingExecution with no round here: the next kick (or pass) rolls it back.
      this.endRound(path, l)
      throw err
    }
    this.track(this.execute(path, r, l))
  }

  /**
   * [THR7] A thread Executing with no round here was left by a process that died: its round
   * resumes into its existing cell (Status stays Executing: never Executing → StartingExecution).
   * Registered inside the re-check, so two handles cannot both resume it.
   */
  private async resume(path: NodePath): Promise<void> {
    let round: RoundState | null = null
    let live: LiveRound | null = null
    await this.nodes.update(SYSTEM, path, (cur) => {
      if (this.stopping || !cur || cur.content.Status !== 'Executing' || this.rounds.has(path)) return undefined
      round = roundOf(cur.content)
      if (!round) return { nodeType: cur.nodeType, name: cur.name, content: { ...cur.content, Status: 'Idle' } }
      live = { controller: new AbortController(), cancelSent: false }
      this.rounds.set(path, live)
      return undefined
    }, 'engine')
    if (round && live) this.track(this.execute(path, round, live))
  }

  /** [THR7] An orphaned StartingExecution claim undone by compare-and-set. Says whether it wrote. */
  private async rollBack(path: NodePath): Promise<boolean> {
    let done = false
    await this.nodes.update(SYSTEM, path, (cur) => {
      if (!cur || cur.content.Status !== 'StartingExecution' || this.rounds.has(path)) return undefined
      done = true
      return { nodeType: cur.nodeType, name: cur.name, content: rolledBack(cur.content) }
    }, 'engine')
    return done
  }

  /** The authors a round acts for: every user behind its input cells (system is nobody's right). */
  private async inputsOf(round: RoundState): Promise<{ texts: string[]; authors: UserId[]; byInput: { id: string; authors: string[] }[] }> {
    const texts: string[] = []
    const byInput: { id: string; authors: string[] }[] = []
    const cells = await Promise.all(round.Inputs.map((p) => this.nodes.get(SYSTEM, p as NodePath)))
    for (const cell of cells) {
      if (!cell) continue
      texts.push(typeof cell.content.Text === 'string' ? cell.content.Text : '')
      const own: string[] = []
      for (const a of [cell.content.Author, ...strings(cell.content.OnBehalfOf)]) {
        if (typeof a === 'string' && a !== 'system' && a !== 'agent') own.push(a)
      }
      byInput.push({ id: idOf(cell.path), authors: own })
    }
    return { texts, authors: [...new Set(byInput.flatMap((i) => i.authors))] as UserId[], byInput }
  }

  /**
   * [THR4][THR6][THR8] Runs the round into its response cell, as its authors. A resumed round
   * ([THR7]) continues the cell's text where it stopped (what is there is not written again).
   */
  private async execute(path: NodePath, round: RoundState, live: LiveRound): Promise<void> {
    const signal = AbortSignal.any([live.controller.signal, this.shutdown.signal])
    const response = round.Response as NodePath
    let outcome: RoundOutcome
    let writer: CellWriter | null = null
    try {
      const { texts, authors, byInput } = await this.inputsOf(round)
      // [THR8] The round acts only with the rights EVERY author holds: each still holds Thread here.
      for (const a of authors) {
        const req = requesterOf(a, 'Thread', path)
        if (req) actAs(this.nodes, req)
      }
      const cell = await this.nodes.get(SYSTEM, response)
      const existing = typeof cell?.content.Text === 'string' ? cell.content.Text : ''
      writer = new CellWriter(this.nodes, response, existing, this.pacer, this.maxResponseChars)
      // A cancel asked before this point (between the claim and now) is honoured at once.
      const now = await this.nodes.get(SYSTEM, path)
      if (now?.content.RequestedStatus === 'Cancelled') live.controller.abort()
      const settings = isJsonObject(now?.content.Agent) ? now.content.Agent : {}
      const kind = (typeof settings.Kind === 'string' ? settings.Kind : 'builtin') as AgentKind
      const agent = this.agents[kind]
      if (!agent) throw new WeftError('unavailable', NO_AGENT[kind] ?? `No agent of kind ${String(kind)}.`)
      // [THR27] A script or a model acts with its authors' rights: only one they posted to. An
      // agent changed by someone else after a message was posted does not get that message.
      const unchosen = kind === 'builtin' || !now ? null : unchosenBy(now.content, byInput)
      if (unchosen !== null) {
        const by = typeof now?.content.AgentSetBy === 'string' ? now.content.AgentSetBy : 'someone'
        throw new WeftError('conflict', `The thread's agent was changed by ${by} after ${unchosen} posted; this round does not run it for them. Post again to ask the agent now set.`)
      }
      const w = writer
      outcome = await agent({
        messages: texts,
        emit: (text) => w.emit(text),
        signal,
        clock: this.roundClock,
        tools: this.toolsFor(path, round, authors),
        thread: path,
        agent: settings,
        // The built-in kind never reads the conversation: it is not fetched for it.
        history: kind === 'builtin' ? [] : await this.historyOf(now, round, authors),
        response: { text: existing, toolCalls: Array.isArray(cell?.content.ToolCalls) ? (cell.content.ToolCalls as unknown as ToolCallRecord[]) : [] },
      })
      await writer.end()
    } catch (err) {
      await writer?.end().catch(() => undefined)
      if (signal.aborted) {
        if (this.shutdown.signal.aborted && !live.controller.signal.aborted) {
          // Shutting down: the round stays Executing, resumed by the next boot ([THR7]).
          this.endRound(path, live)
          return
        }
        outcome = { disposition: 'Completed' }
      } else {
        const message = err instanceof WeftError ? `${err.code}: ${err.message}` : `The round failed: ${(err as Error).message}`
        outcome = { disposition: 'Failed', error: message }
      }
    }
    try {
      if (outcome.error) await this.nodes.patch(SYSTEM, response, { Error: outcome.error }, 'engine')
      // [WEB71] A stop the round heard is said on its cell, before the thread says Cancelled: a
      // cell with no text otherwise reads as an answer that never came.
      if (live.controller.signal.aborted) await this.nodes.patch(SYSTEM, response, { Stopped: true }, 'engine')
      await this.finish(path, round, live, outcome)
    } finally {
      this.endRound(path, live)
    }
  }

  /** [THR11]–[THR16] What an agent may do in this round, each as the round's authority. */
  private toolsFor(path: NodePath, round: RoundState, authors: UserId[]): AgentTools {
    const delegate = (task: string, s: AbortSignal, key?: string) => this.delegate(path, round, authors, task, s, key)
    const mesh = new RoundTools(this.nodes, authors, {
      delegate,
      run: async (codePath, inputs, principals, s) => {
        const out = await runActivity(this.nodes, codePath, inputs, principals, s)
        return { Status: out.status, ReturnValue: out.returnValue, Error: out.error, Activity: out.activity }
      },
    })
    const response = round.Response as NodePath
    return {
      delegate,
      call: (tool, args, also, s, key) => mesh.call(tool, args, also, s, key),
      authorize: (tool, args, also) => mesh.authorize(tool, args, also),
      approval: (req, s) => awaitApproval(this.nodes, path, round.Response, req, this.roundClock, s),
      recordToolCalls: async (calls) => {
        await this.nodes.patch(SYSTEM, response, { ToolCalls: calls as unknown as JsonValue[] }, 'engine')
      },
      runScript: async (codePath, inputs, s, onLine) => {
        const p = tryParseNodePath(codePath)
        if (!p) throw new WeftError('invalid_request', `Agent.CodePath ${JSON.stringify(codePath)} is not a node path.`)
        return runActivity(this.nodes, p, inputs, authors, s, onLine, async (activity) => {
          await this.nodes.patch(SYSTEM, response, { ActivityPath: activity }, 'engine')
        })
      },
    }
  }

  /** The thread's messages before this round (the last HISTORY_CELLS), for agents that need them. */
  private async historyOf(thread: MeshNode | null, round: RoundState, authors: readonly UserId[]): Promise<HistoryEntry[]> {
    const all = strings(thread?.content.Messages)
    const end = all.indexOf(round.Inputs[0]!)
    // [THR8] Only what every author of the round reads: a message one of them is denied is not
    // handed to the agent acting for them (the model would repeat it into a cell they read).
    const readable = (p: string) => authors.every((a) => this.nodes.permissions(userPrincipal(a), p as NodePath).has('Read'))
    const before = (end < 0 ? [] : all.slice(0, end)).filter(readable).slice(-HISTORY_CELLS)
    const cells = await Promise.all(before.map((p) => this.nodes.get(SYSTEM, p as NodePath)))
    const out: HistoryEntry[] = []
    for (const c of cells) {
      const role = c?.content.Role
      if (role !== 'user' && role !== 'assistant' && role !== 'tool') continue
      const text = typeof c!.content.Text === 'string' ? c!.content.Text : ''
      if (text !== '') out.push({ role, text })
    }
    return out
  }

  /**
   * [THR5][THR6] The terminal write, one update: Status Idle (or Cancelled, clearing
   * RequestedStatus), Disposition, LastActivityAt; the approval fields cleared (a cancel while an
   * approval was pending leaves none to answer); compare-and-set on the round.
   */
  private async finish(path: NodePath, round: RoundState, live: LiveRound, outcome: RoundOutcome): Promise<void> {
    await this.pacer.turn()
    const at = this.roundClock.now().toISOString()
    await this.nodes.update(SYSTEM, path, (cur) => {
      if (!cur || cur.content.Status !== 'Executing' || roundOf(cur.content)?.Response !== round.Response) return undefined
      // The round is over here in the same stretch as the write: the handle that sees this
      // write (pending input → the next round) finds no live round in the way.
      this.endRound(path, live)
      const cancelled = live.controller.signal.aborted || cur.content.RequestedStatus === 'Cancelled'
      const content: JsonObject = { ...without(cur.content, 'Round', 'RequestedStatus', 'Question', 'Disposition', ...APPROVAL_FIELDS), LastActivityAt: at }
      if (cancelled) content.Status = 'Cancelled'
      else {
        content.Status = 'Idle'
        content.Disposition = outcome.disposition
        if (outcome.question !== undefined) content.Question = outcome.question
      }
      return { nodeType: cur.nodeType, name: cur.name, content }
    }, 'engine')
  }

  /**
   * [THR6] Cancel of a live round: it aborts (its terminal write sets Cancelled and clears the
   * request); its running sub-threads are asked too, once.
   */
  private async cancelLive(path: NodePath, live: LiveRound): Promise<void> {
    live.controller.abort()
    if (live.cancelSent) return
    live.cancelSent = true
    await this.cancelChildren(path)
  }

  /**
   * [THR6] A cancel request on a thread with no round here, settled by compare-and-set: a resting
   * thread's request is cleared, an orphaned claim rolled back as Cancelled, an orphaned round
   * ended Cancelled. Says whether it wrote.
   */
  private async settleCancel(path: NodePath): Promise<boolean> {
    const at = this.roundClock.now().toISOString()
    let done = false
    let stopped: NodePath | null = null
    await this.nodes.update(SYSTEM, path, (cur) => {
      if (!cur || cur.content.RequestedStatus !== 'Cancelled' || this.rounds.has(path)) return undefined
      done = true
      const c = cur.content
      const s = statusOf(cur)
      stopped = s === 'Executing' ? ((roundOf(c)?.Response as NodePath | undefined) ?? null) : null
      if (s === 'StartingExecution') return { nodeType: cur.nodeType, name: cur.name, content: { ...rolledBack(c), Status: 'Cancelled', LastActivityAt: at } }
      // A thread resting on a question it asked is waiting too: the cancel withdraws the question
      // and ends the wait as Cancelled (a parent waiting on this sub-thread hears it).
      const awaiting = awaitingInput(cur)
      const content = without(c, 'RequestedStatus', 'Round', ...APPROVAL_FIELDS, ...(awaiting ? ['Disposition', 'Question'] : []))
      if (s === 'Executing' || awaiting) Object.assign(content, { Status: 'Cancelled', LastActivityAt: at })
      return { nodeType: cur.nodeType, name: cur.name, content }
    }, 'engine')
    // [WEB71] An orphaned round ended Cancelled: its cell says it was stopped (when it was made).
    const cell: NodePath | null = stopped
    if (cell && (await this.nodes.get(SYSTEM, cell))) await this.nodes.patch(SYSTEM, cell, { Stopped: true }, 'engine')
    if (done) await this.cancelChildren(path)
    return done
  }

  private async cancelChildren(path: NodePath): Promise<void> {
    for await (const child of this.scan({ ParentPath: path })) {
      const n = await this.nodes.get(SYSTEM, child)
      if (!n || n.content.ParentPath !== path || (RESTING.has(statusOf(n)) && !awaitingInput(n))) continue
      await this.nodes.patch(SYSTEM, child, { RequestedStatus: 'Cancelled' }, 'engine')
    }
  }

  /**
   * [THR9] `/delegate`: a sub-thread (child of the thread, same agent, ParentPath set) with the
   * task as its first message, made only when EVERY author of the round may create there; a
   * NodeStatus subscription (PostThreadMessage to the parent) records the hand-back durably; the
   * round waits here for the sub-thread to come to rest after running. A resumed round finds the
   * sub-thread (and the subscription) by their fixed paths and waits again: it continues once.
   */
  private async delegate(path: NodePath, round: RoundState, authors: UserId[], task: string, signal: AbortSignal, key?: string): Promise<{ answer: string; question: string | null }> {
    if (authors.length === 0) throw new WeftError('forbidden', 'Nobody behind this round may delegate.')
    const firstId = key === undefined ? idOf(round.Inputs[0]!) : `${idOf(round.Inputs[0]!)}.${key}`
    const sub = subThreadPath(path, firstId)
    // [THR24] Each level is a round waiting on the next: a chain past the limit is refused.
    const depth = sub.split('/').filter((segment) => segment.startsWith('_sub.')).length
    if (depth > this.maxDepth) throw new WeftError('invalid_request', `Delegation refused: ${sub} would be ${depth} sub-threads deep; at most ${this.maxDepth}.`)
    for (const a of authors) request(this.nodes, userPrincipal(a), 'Create', sub)
    const parent = await this.nodes.get(SYSTEM, path)
    const at = this.roundClock.now()
    let name = `Delegated: ${toStorableText(cutText(task, 60))}`
    await this.nodes.update(SYSTEM, sub, (cur) => {
      // A resumed round finds its sub-thread (perhaps renamed since): the hand-back says that name.
      if (cur) {
        name = cur.name
        return undefined
      }
      return {
        nodeType: 'Thread',
        name,
        content: { Agent: parent?.content.Agent ?? { Kind: 'builtin' }, Status: 'Idle', ParentPath: path, Messages: [], UserMessageIds: [], IngestedMessageIds: [], PendingUserMessages: [], Posted: {} },
      }
    }, 'engine')
    const subId = `thread_${firstId}_${sub.length.toString(36)}_${hash(sub)}`
    await this.nodes.update(SYSTEM, subscriptionPath(subId) as NodePath, (cur) => cur ? undefined : {
      nodeType: 'EventSubscription',
      name: subId,
      content: {
        Id: subId, TriggerType: 'NodeStatus', WatchPath: sub, StatusField: 'Status', RestingValues: ['Idle', 'Cancelled', 'Done'],
        RequireActiveFirst: true, HoldField: 'Disposition', HoldValues: ['AwaitingInput'], ContinuationType: 'PostThreadMessage', TargetPath: path, Status: 'Pending', CreatedBy: authors[0]!,
        // [THR32] The sub-thread as people read it (its name, as the Sub-threads list shows it),
        // never its path: `_sub.{id}` is the engine's, not a person's.
        Text: `“${name}” has finished.`,
      },
    }, 'engine')
    await postCell(this.nodes, sub, 'task', userCell(authors[0]!, task, at, authors.slice(1)))
    const onAbort = () => void this.nodes.patch(SYSTEM, sub, { RequestedStatus: 'Cancelled' }, 'engine').catch(() => undefined)
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const done = await firstValueFrom(
        this.nodes.node$(sub).pipe(
          takeWhile((n): n is MeshNode => n !== null),
          filter((n) => strings(n.content.IngestedMessageIds).includes('task') && RESTING.has(statusOf(n)) && roundOf(n.content) === null),
        ),
        { defaultValue: null },
      )
      signal.throwIfAborted()
      if (!done) throw new WeftError('not_found', `The sub-thread ${sub} is gone.`)
      const last = [...strings(done.content.Messages)].reverse()
      let answer = ''
      for (const p of last) {
        const c = await this.nodes.get(SYSTEM, p as NodePath)
        if (c?.content.Role === 'assistant') {
          answer = typeof c.content.Error === 'string' ? c.content.Error : String(c.content.Text ?? '')
          break
        }
      }
      if (done.content.Status === 'Cancelled') answer = `“${done.name}” was cancelled.`
      const question = done.content.Disposition === 'AwaitingInput' && typeof done.content.Question === 'string' ? done.content.Question : null
      return { answer, question }
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  /** Paths of the threads matching `where`, a page at a time, reading no content (kit/light-query). */
  private async *scan(where: Record<string, string>): AsyncGenerator<NodePath> {
    const page = lightPage(this.nodes, { nodeType: 'Thread', where }, [])
    let after: string | undefined
    for (;;) {
      const rows = await page(after, SCAN_PAGE)
      for (const row of rows) yield row.path
      if (rows.length < SCAN_PAGE) return
      after = rows[rows.length - 1]!.path
    }
  }
}

/** Resting on a question the agent asked (no round running): a cancel withdraws it. */
function awaitingInput(node: MeshNode): boolean {
  return statusOf(node) === 'Idle' && node.content.Disposition === 'AwaitingInput' && roundOf(node.content) === null
}

/** An orphaned claim undone: its input pending again (first), its cells out of Messages. */
function rolledBack(c: JsonObject): JsonObject {
  const round = roundOf(c)
  const inputs = round?.Inputs ?? []
  const out = new Set([...inputs, ...(round ? [round.Response] : [])])
  const ids = new Set(inputs.map(idOf))
  return {
    ...without(c, 'Round', 'RequestedStatus'),
    Status: 'Idle',
    Messages: strings(c.Messages).filter((m) => !out.has(m)),
    IngestedMessageIds: strings(c.IngestedMessageIds).filter((i) => !ids.has(i)),
    PendingUserMessages: [...inputs, ...strings(c.PendingUserMessages).filter((p) => !inputs.includes(p))],
    HasPending: inputs.length + strings(c.PendingUserMessages).length > 0,
  }
}

function hash(s: string): string {
  let h = 2166136261
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619)
  return (h >>> 0).toString(36)
}
