import { setMaxListeners } from 'node:events'
import { filter, firstValueFrom, Subscription, takeWhile } from 'rxjs'
import type { Logger } from 'pino'
import {
  SYSTEM,
  WeftError,
  isJsonObject,
  subscriptionPath,
  tryParseNodePath,
  userPrincipal,
  type JsonObject,
  type MeshNode,
  type NodePath,
  type UserId,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { lightPage } from '../kit/index.js'
import { field, watchControlPlane, watchSubmission } from '../activities/control-plane.js'
import { actAs, request, requesterOf } from '../kit/index.js'
import { builtinAgent, type Agent, type AgentTools, type HistoryEntry, type RoundOutcome, type ToolCallRecord } from './builtin-agent.js'
import { APPROVAL_FIELDS, awaitApproval } from './approvals.js'
import { RoundTools } from './round-tools.js'
import { runActivity } from './script-agent.js'
import { RESTING, idOf, needsDispatch, responsePath, roundOf, statusOf, strings, subThreadPath, without, type Clock, type RoundState } from './model.js'
import { enqueue, postCell, userCell } from './post.js'

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
}

const SCAN_PAGE = 500

/**
 * [THR3]–[THR9] The threads engine: the sole writer of a Thread's round state. Its pieces map
 * onto the engine kit's `defineEngine({ name, watch, reconcile, handle })`:
 *  - watch: `changes$` of Thread and ThreadMessage nodes → `watch(path)` / `adopt(cell)`;
 *  - claim: `claim(path)`, the re-check inside `update` (Idle|Cancelled + pending → StartingExecution);
 *  - handle: `execute(path, round)` (the agent streams into the round's one response cell), `cancel(path)`;
 *  - reconcile: `reconcile()` on boot (resume Executing, roll back StartingExecution, watch pending).
 */
export class ThreadEngine {
  private readonly watchers = new Map<NodePath, Subscription>()
  private readonly rounds = new Map<NodePath, LiveRound>()
  private readonly feed = new Subscription()
  private readonly shutdown = new AbortController()
  private readonly work = new Set<Promise<unknown>>()
  private stopping = false

  constructor(
    private readonly nodes: NodeApi,
    private readonly log: Logger,
    private readonly clock: Clock,
    signal: AbortSignal,
    private readonly agents: AgentSet = { builtin: builtinAgent },
  ) {
    setMaxListeners(0, this.shutdown.signal)
    if (signal.aborted) this.shutdown.abort()
    else signal.addEventListener('abort', () => this.shutdown.abort(), { once: true })
  }

  // ---------------------------------------------------------------- watch

  async start(): Promise<void> {
    this.feed.add(
      this.nodes.changes$.subscribe((c) => {
        if (this.stopping) return
        if (c.nodeType === 'Thread') {
          // A thread at rest with nothing to do holds no watcher (the next change re-installs it).
          if (c.node && !isAtRest(c.node)) this.watch(c.path)
          else if (!this.rounds.has(c.path)) this.unwatch(c.path)
        } else if (c.nodeType === 'ThreadMessage' && c.kind === 'Created' && c.by !== 'system' && c.node?.content.Role === 'user') {
          // [THR1] A person's own cell made on their device (offline composing): ingested by its id.
          this.track(this.adopt(c.path))
        }
      }),
    )
    await this.reconcile()
  }

  async stop(): Promise<void> {
    this.stopping = true
    this.shutdown.abort()
    this.feed.unsubscribe()
    for (const p of [...this.watchers.keys()]) this.unwatch(p)
    // Live rounds end through the shutdown signal (each round's signal follows it): they stay
    // Executing on the node, resumed by the next boot ([THR7]), never settled as cancelled.
    await Promise.allSettled([...this.work])
  }

  private track(p: Promise<unknown>): void {
    const t = p.catch((err: unknown) => this.log.error({ err }, 'thread work failed'))
    this.work.add(t)
    void t.finally(() => this.work.delete(t))
  }

  private async adopt(cell: NodePath): Promise<void> {
    const thread = tryParseNodePath(cell.slice(0, cell.lastIndexOf('/')))
    if (thread) await enqueue(this.nodes, thread, idOf(cell))
  }

  /** Watches one thread (idempotent): the submission watcher and the cancel watcher. */
  watch(path: NodePath): void {
    if (this.stopping || this.watchers.has(path)) return
    const sub = new Subscription()
    this.watchers.set(path, sub)
    const opts = { log: this.log, signal: this.shutdown.signal, onGone: () => this.unwatch(path) }
    sub.add(
      watchSubmission(
        this.nodes,
        path,
        (n) => [field(n, 'Status'), field(n, 'PendingUserMessages'), field(n, 'RequestedStatus')],
        needsDispatch,
        () => this.claim(path),
        opts,
      ),
    )
    sub.add(
      watchControlPlane(this.nodes, path, (requested) => {
        if (requested === 'Cancelled') this.track(this.cancel(path))
      }, opts),
    )
  }

  private unwatch(path: NodePath): void {
    const sub = this.watchers.get(path)
    if (!sub) return
    this.watchers.delete(path)
    sub.unsubscribe()
  }

  isWatched(path: NodePath): boolean {
    return this.watchers.has(path)
  }

  liveRounds(): NodePath[] {
    return [...this.rounds.keys()]
  }

  // ---------------------------------------------------------------- claim

  /**
   * [THR3] The claim: the re-check inside `update` moves Idle|Cancelled with pending input to
   * StartingExecution, drains EVERY pending message into the round (Messages gets them and the
   * round's one response cell, IngestedMessageIds their ids) in that one write; the live round is
   * registered in the same synchronous stretch.
   */
  async claim(path: NodePath): Promise<void> {
    if (this.stopping) return
    let live: LiveRound | null = null
    let round: RoundState | null = null
    const at = this.clock.now().toISOString()
    try {
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.nodeType !== 'Thread' || !needsDispatch(cur) || this.rounds.has(path)) return undefined
        const c = cur.content
        const inputs = strings(c.PendingUserMessages)
        const response = responsePath(path, idOf(inputs[0]!))
        round = { Response: response, Inputs: inputs }
        live = { controller: new AbortController() }
        this.rounds.set(path, live)
        const content: JsonObject = {
          ...without(c, 'Disposition', 'Question'),
          Status: 'StartingExecution',
          ExecutionStartedAt: at,
          PendingUserMessages: [],
          HasPending: false,
          IngestedMessageIds: [...strings(c.IngestedMessageIds), ...inputs.map(idOf)],
          Messages: [...strings(c.Messages), ...inputs, response],
          Round: { Response: response, Inputs: inputs },
        }
        return { nodeType: cur.nodeType, name: cur.name, content }
      }, 'engine')
    } catch (err) {
      if (live && this.rounds.get(path) === live) this.rounds.delete(path)
      throw err
    }
    if (!live || !round) return
    const r: RoundState = round
    const l: LiveRound = live
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
    if (!executing) {
      this.rounds.delete(path)
      return
    }
    this.track(this.execute(path, r, l))
  }

  // ---------------------------------------------------------------- handle

  /** The authors a round acts for: every user behind its input cells (system is nobody's right). */
  private async inputsOf(round: RoundState): Promise<{ texts: string[]; authors: UserId[] }> {
    const texts: string[] = []
    const authors = new Set<string>()
    for (const p of round.Inputs) {
      const cell = await this.nodes.get(SYSTEM, p as NodePath)
      if (!cell) continue
      texts.push(typeof cell.content.Text === 'string' ? cell.content.Text : '')
      for (const a of [cell.content.Author, ...strings(cell.content.OnBehalfOf)]) {
        if (typeof a === 'string' && a !== 'system' && a !== 'agent') authors.add(a)
      }
    }
    return { texts, authors: [...authors] as UserId[] }
  }

  /**
   * [THR4][THR6] Runs the round into its response cell. A resumed round ([THR7]) continues the
   * cell's text where it stopped (the built-in agent is deterministic: what is there is skipped).
   */
  private async execute(path: NodePath, round: RoundState, live: LiveRound): Promise<void> {
    const signal = AbortSignal.any([live.controller.signal, this.shutdown.signal])
    let outcome: RoundOutcome
    try {
      const { texts, authors } = await this.inputsOf(round)
      // [THR8] The round acts only with the rights EVERY author holds: each still holds Thread here.
      for (const a of authors) {
        const req = requesterOf(a, 'Thread', path)
        if (req) actAs(this.nodes, req)
      }
      const cell = await this.nodes.get(SYSTEM, round.Response as NodePath)
      const existing = typeof cell?.content.Text === 'string' ? cell.content.Text : ''
      let text = ''
      const emit = async (w: string) => {
        const next = text + w
        text = next
        // A resumed round: what the cell already holds is not written again.
        if (existing.startsWith(next)) return
        await this.nodes.patch(SYSTEM, round.Response as NodePath, { Text: next }, 'engine')
      }
      // A cancel asked before this point (between the claim and now) is honoured at once.
      const now = await this.nodes.get(SYSTEM, path)
      if (now?.content.RequestedStatus === 'Cancelled') live.controller.abort()
      const settings = isJsonObject(now?.content.Agent) ? now.content.Agent : {}
      const kind = (typeof settings.Kind === 'string' ? settings.Kind : 'builtin') as AgentKind
      const agent = this.agents[kind]
      if (!agent) throw new WeftError('unavailable', NO_AGENT[kind] ?? `No agent of kind ${String(kind)}.`)
      outcome = await agent({
        messages: texts,
        emit,
        signal,
        clock: this.clock,
        tools: this.toolsFor(path, round, authors),
        thread: path,
        agent: settings,
        // The built-in kind never reads the conversation: it is not fetched for it.
        history: kind === 'builtin' ? [] : await this.historyOf(now, round),
        response: { text: existing, toolCalls: Array.isArray(cell?.content.ToolCalls) ? (cell.content.ToolCalls as unknown as ToolCallRecord[]) : [] },
      })
      if (text !== existing && !existing.startsWith(text) && text.length < existing.length) {
        await this.nodes.patch(SYSTEM, round.Response as NodePath, { Text: text }, 'engine')
      }
    } catch (err) {
      if (signal.aborted) {
        if (this.shutdown.signal.aborted && !live.controller.signal.aborted) {
          // Shutting down: the round stays Executing, resumed by the next boot ([THR7]).
          this.rounds.delete(path)
          return
        }
        outcome = { disposition: 'Completed' }
      } else {
        const message = err instanceof WeftError ? `${err.code}: ${err.message}` : `The round failed: ${(err as Error).message}`
        outcome = { disposition: 'Failed', error: message }
      }
    }
    try {
      if (outcome.error) await this.nodes.patch(SYSTEM, round.Response as NodePath, { Error: outcome.error }, 'engine')
      await this.finish(path, round, live, outcome)
    } finally {
      if (this.rounds.get(path) === live) this.rounds.delete(path)
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
      approval: (req, s) => awaitApproval(this.nodes, path, round.Response, req, this.clock, s),
      recordToolCalls: async (calls) => {
        await this.nodes.patch(SYSTEM, response, { ToolCalls: calls as unknown as JsonObject[] }, 'engine')
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
  private async historyOf(thread: MeshNode | null, round: RoundState): Promise<HistoryEntry[]> {
    const all = strings(thread?.content.Messages)
    const end = all.indexOf(round.Inputs[0]!)
    const before = (end < 0 ? [] : all.slice(0, end)).slice(-HISTORY_CELLS)
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
   * RequestedStatus), Disposition, LastActivityAt; compare-and-set on the round.
   */
  private async finish(path: NodePath, round: RoundState, live: LiveRound, outcome: RoundOutcome): Promise<void> {
    const at = this.clock.now().toISOString()
    await this.nodes.update(SYSTEM, path, (cur) => {
      if (!cur || cur.content.Status !== 'Executing' || roundOf(cur.content)?.Response !== round.Response) return undefined
      // The round is over here in the same stretch as the write: the watcher that sees this
      // write (pending input → the next round) finds no live round in the way.
      if (this.rounds.get(path) === live) this.rounds.delete(path)
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
   * [THR6] Cancel: a live round aborts (its terminal write sets Cancelled and clears the request);
   * a thread with no round here is settled by compare-and-set; running sub-threads are asked too.
   */
  async cancel(path: NodePath): Promise<void> {
    const live = this.rounds.get(path)
    if (live) live.controller.abort()
    else {
      const at = this.clock.now().toISOString()
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.content.RequestedStatus !== 'Cancelled' || this.rounds.has(path)) return undefined
        const c = cur.content
        const s = statusOf(cur)
        if (s === 'StartingExecution') return { nodeType: cur.nodeType, name: cur.name, content: { ...rolledBack(c), Status: 'Cancelled', LastActivityAt: at } }
        const content = without(c, 'RequestedStatus', 'Round', ...APPROVAL_FIELDS)
        if (s === 'Executing') Object.assign(content, { Status: 'Cancelled', LastActivityAt: at })
        return { nodeType: cur.nodeType, name: cur.name, content }
      }, 'engine')
    }
    await this.cancelChildren(path)
  }

  private async cancelChildren(path: NodePath): Promise<void> {
    for await (const child of this.scan({ ParentPath: path })) {
      const n = await this.nodes.get(SYSTEM, child)
      if (!n || n.content.ParentPath !== path || RESTING.has(statusOf(n))) continue
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
    for (const a of authors) request(this.nodes, userPrincipal(a), 'Create', sub)
    const parent = await this.nodes.get(SYSTEM, path)
    const at = this.clock.now()
    await this.nodes.update(SYSTEM, sub, (cur) => cur ? undefined : {
      nodeType: 'Thread',
      name: `Delegated: ${task.slice(0, 60)}`,
      content: { Agent: parent?.content.Agent ?? { Kind: 'builtin' }, Status: 'Idle', ParentPath: path, Messages: [], UserMessageIds: [], IngestedMessageIds: [], PendingUserMessages: [] },
    }, 'engine')
    const subId = `thread_${firstId}_${sub.length.toString(36)}_${hash(sub)}`
    await this.nodes.update(SYSTEM, subscriptionPath(subId) as NodePath, (cur) => cur ? undefined : {
      nodeType: 'EventSubscription',
      name: subId,
      content: {
        Id: subId, TriggerType: 'NodeStatus', WatchPath: sub, StatusField: 'Status', RestingValues: ['Idle', 'Cancelled', 'Done'],
        RequireActiveFirst: true, ContinuationType: 'PostThreadMessage', TargetPath: path, Status: 'Pending', CreatedBy: authors[0]!,
        Text: `${sub} has finished.`,
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
      if (done.content.Status === 'Cancelled') answer = `${sub} was cancelled.`
      const question = done.content.Disposition === 'AwaitingInput' && typeof done.content.Question === 'string' ? done.content.Question : null
      return { answer, question }
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  // ---------------------------------------------------------------- reconcile

  /**
   * [THR7] Recovery on boot (this process has no round yet): a thread left Executing resumes its
   * round into its existing cell (Status stays Executing: never Executing → StartingExecution); an
   * orphaned StartingExecution is rolled back by compare-and-set, its input pending again; threads
   * with pending input or a cancel request are watched (which dispatches them).
   */
  async reconcile(): Promise<void> {
    for await (const path of this.scan({ Status: 'StartingExecution' })) {
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.content.Status !== 'StartingExecution' || this.rounds.has(path)) return undefined
        return { nodeType: cur.nodeType, name: cur.name, content: rolledBack(cur.content) }
      }, 'engine')
      this.watch(path)
    }
    for await (const path of this.scan({ Status: 'Executing' })) {
      let round: RoundState | null = null
      let live: LiveRound | null = null
      await this.nodes.update(SYSTEM, path, (cur) => {
        if (!cur || cur.content.Status !== 'Executing' || this.rounds.has(path)) return undefined
        round = roundOf(cur.content)
        if (!round) return { nodeType: cur.nodeType, name: cur.name, content: { ...cur.content, Status: 'Idle' } }
        live = { controller: new AbortController() }
        this.rounds.set(path, live)
        return undefined
      }, 'engine')
      this.watch(path)
      if (round && live) this.track(this.execute(path, round, live))
    }
    for (const where of [{ HasPending: 'true' }, { RequestedStatus: 'Cancelled' }] as Record<string, string>[]) {
      for await (const path of this.scan(where)) this.watch(path)
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

function isAtRest(n: MeshNode): boolean {
  return RESTING.has(statusOf(n)) && strings(n.content.PendingUserMessages).length === 0 && n.content.RequestedStatus == null && roundOf(n.content) === null
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
