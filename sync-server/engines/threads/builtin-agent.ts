import type { JsonObject, JsonValue } from '../../../shared/index.js'
import type { Clock } from './model.js'

/**
 * [THR4] The built-in deterministic agent (DESIGN.md "Threads (contract)"): a pluggable round
 * executor. It answers `You said: ` + the round's messages joined by ` / `, a word at a time;
 * `/sleep <ms>` makes the round take that long, `/fail` fails it, `/ask <q>` asks, `/delegate
 * <task>` hands the task to a sub-thread through `tools.delegate`.
 */

export interface RoundOutcome {
  disposition: 'Completed' | 'AwaitingInput' | 'Failed'
  error?: string
  question?: string
}

export interface AgentTools {
  /** Runs `task` in a sub-thread, as every author of the round; resolves with its outcome. `key` tells apart several in one round. */
  delegate(task: string, signal: AbortSignal, key?: string): Promise<{ answer: string; question: string | null }>
  /**
   * [THR11] A tool over the mesh (read, query, patch, create, run, delegate) as the round's
   * authority: allowed only when every author (and each of `also`, e.g. the approver) could make
   * it; a refusal throws a WeftError and nothing runs.
   */
  call(tool: string, args: unknown, also: readonly string[], signal: AbortSignal, key?: string): Promise<JsonValue>
  /** The check `call` makes, without doing anything. */
  authorize(tool: string, args: unknown, also: readonly string[]): Promise<void>
  /** [THR13] Pauses the round until a person answers the approval `req` (kept on the thread). */
  approval(req: ApprovalRequest, signal: AbortSignal): Promise<{ decision: 'Approved' | 'Denied'; by: string }>
  /** Records the round's tool calls on its response cell (so a resumed round knows them). */
  recordToolCalls(calls: readonly ToolCallRecord[]): Promise<void>
  /** [THR16] Runs the Code node as an activity as the round's authority; `onLine` gets its log lines. */
  runScript(codePath: string, inputs: JsonObject, signal: AbortSignal, onLine: (text: string) => Promise<void>): Promise<ScriptResult>
}

export interface ApprovalRequest {
  Id: string
  Tool: string
  Args: JsonValue
  Summary: string
}

/** A tool call of a round, as the response cell's `ToolCalls` holds it. */
export interface ToolCallRecord {
  Id: string
  Tool: string
  Args: JsonValue
  /** The model step it belongs to, and how much of the cell's text preceded its end. */
  Step: number
  TextAt: number
  Status: 'Pending' | 'AwaitingApproval' | 'Approved' | 'Denied' | 'Done' | 'Error'
  ApprovedBy?: string
  Result?: JsonValue
  Error?: string
}

export interface ScriptResult {
  status: string
  returnValue: JsonValue | null
  error: string | null
  activity: string
}

/** A message of the thread before this round, for an agent that needs the conversation. */
export interface HistoryEntry {
  role: 'user' | 'assistant' | 'tool'
  text: string
}

export interface RoundIo {
  /** The round's input texts, in order. */
  messages: readonly string[]
  /** Streams `text` after what the response cell holds (resolves once applied). */
  emit(text: string): Promise<void>
  signal: AbortSignal
  clock: Clock
  tools: AgentTools
  /** The thread, its Agent settings, the conversation before this round (empty for the built-in kind, which never reads it). */
  thread: string
  agent: JsonObject
  history: readonly HistoryEntry[]
  /** What the response cell already holds (a round resumed after a restart continues it). */
  response: { text: string; toolCalls: readonly ToolCallRecord[] }
}

export type Agent = (io: RoundIo) => Promise<RoundOutcome>

async function stream(io: RoundIo, answer: string): Promise<void> {
  const words = answer.split(/(?<= )/)
  for (const w of words) {
    io.signal.throwIfAborted()
    await io.emit(w)
  }
}

const MAX_SLEEP_MS = 10 * 60_000

export const builtinAgent: Agent = async (io) => {
  const texts = io.messages.map((m) => m.trim())
  for (const t of texts) {
    const sleep = /^\/sleep\s+(\d{1,9})\s*$/.exec(t)
    if (sleep) await io.clock.sleep(Math.min(MAX_SLEEP_MS, Number(sleep[1])), io.signal)
  }
  if (texts.some((t) => t === '/fail' || t.startsWith('/fail '))) return { disposition: 'Failed', error: 'The round failed on request (/fail).' }
  const ask = texts.find((t) => t.startsWith('/ask '))
  if (ask !== undefined) {
    const question = ask.slice(5).trim()
    await stream(io, question)
    return { disposition: 'AwaitingInput', question }
  }
  const delegate = texts.find((t) => t.startsWith('/delegate '))
  if (delegate !== undefined) {
    const out = await io.tools.delegate(delegate.slice(10).trim(), io.signal)
    await stream(io, `Delegated: ${out.question ?? out.answer}`)
    return out.question !== null ? { disposition: 'AwaitingInput', question: out.question } : { disposition: 'Completed' }
  }
  await stream(io, `You said: ${texts.join(' / ')}`)
  return { disposition: 'Completed' }
}
