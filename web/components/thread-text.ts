import { isJsonObject, type JsonObject, type JsonValue } from '../../shared/json.js'
import { RESTING, hasWaitingInput, strings } from '../../shared/threads.js'

/**
 * A thread's state in words (DESIGN.md "Threads (contract)", [WEB31]). Pure functions (no DOM):
 * the thread page, its sub-thread links and the home's list share them.
 */

export type ThreadStateKind = 'thinking' | 'stopping' | 'asking' | 'approval' | 'queued' | 'failed' | 'cancelled' | 'done' | 'answered' | 'ready'

export interface ThreadState {
  kind: ThreadStateKind
  label: string
  /** A round is in flight: Stop applies. */
  live: boolean
}


/** A non-empty string, else null. */
export const str = (v: JsonValue | undefined): string | null => (typeof v === 'string' && v !== '' ? v : null)


/**
 * Who reads the state, where it matters: a question is "yours" only to those who may answer it
 * (a Viewer reads that it waits), and a list of one's threads says it needs an answer.
 */
export interface ThreadReader {
  mayAnswer: boolean
  /** Shown in a list of the reader's threads (the home), not on the thread's own page. */
  inList?: boolean
}

/**
 * [WEB75] The answer's cell of the round the thread's last Stop ended, told by the thread alone:
 * a thread at rest as Cancelled with nothing waiting ended its last round with a stop, and that
 * round's cell is the last message it lists (a stop before the round began rolls its messages
 * back as waiting input: not this). For cells made before [WEB71] marked them `Stopped`. An earlier
 * round's stop is not kept on the thread: null then, and its cell keeps the neutral wording.
 */
export function lastStoppedCell(c: JsonObject): string | null {
  if (c.Status !== 'Cancelled' || hasWaitingInput(c)) return null
  return strings(c.Messages).at(-1) ?? null
}

/** What the thread is doing, as everyone watching it reads it (`reader`: see ThreadReader). */
export function threadState(c: JsonObject, reader?: ThreadReader): ThreadState {
  const status = str(c.Status) ?? 'Idle'
  const live = !RESTING.has(status)
  if (live && c.RequestedStatus === 'Cancelled') return { kind: 'stopping', label: 'Stopping…', live }
  if (pendingApproval(c)) return { kind: 'approval', label: 'Waiting for approval', live }
  if (live) return { kind: 'thinking', label: 'Thinking…', live }
  if (hasWaitingInput(c)) return { kind: 'queued', label: 'Starting…', live: false }
  if (status === 'Cancelled') return { kind: 'cancelled', label: 'Cancelled', live: false }
  if (status === 'Done') return { kind: 'done', label: 'Done', live: false }
  switch (c.Disposition) {
    case 'AwaitingInput':
      return { kind: 'asking', label: reader && !reader.mayAnswer ? 'Waiting for an answer' : reader?.inList ? 'Needs your answer' : 'Waiting for your answer', live: false }
    case 'Failed':
      return { kind: 'failed', label: 'The last round failed', live: false }
    case 'Completed':
      return { kind: 'answered', label: 'Answered', live: false }
    default:
      return { kind: 'ready', label: 'Ready', live: false }
  }
}

/** The approval the agent waits for (system-written), when there is one. */
export interface PendingApproval {
  Id: string
  Tool: string
  Args: JsonValue
  Summary: string
  RequestedAt: string | null
}

export function pendingApproval(c: JsonObject): PendingApproval | null {
  const p = c.PendingApproval
  if (!isJsonObject(p)) return null
  const id = str(p.Id)
  if (!id) return null
  return { Id: id, Tool: str(p.Tool) ?? 'a tool', Args: p.Args ?? null, Summary: str(p.Summary) ?? '', RequestedAt: str(p.RequestedAt) }
}

/** The answer already given to this approval (the person's patch, before the engine clears it). */
export function answeredDecision(c: JsonObject, id: string): 'Approved' | 'Denied' | null {
  const a = c.ApprovalAnswer
  if (!isJsonObject(a) || a.Id !== id) return null
  return a.Decision === 'Approved' || a.Decision === 'Denied' ? a.Decision : null
}

/** How a cell's role reads beside its author. */
export function roleWord(role: JsonValue | undefined): string {
  if (role === 'assistant') return 'Agent'
  if (role === 'tool') return 'Tool'
  return 'Message'
}

/** The agent's name in words ({ Kind: "builtin" } → "Built-in agent"). */
export function agentName(agent: JsonValue | undefined): string {
  const a = isJsonObject(agent) ? agent : null
  if (a?.Kind === 'llm') {
    const model = str(a.Model)
    return model ? `AI agent (${model})` : 'AI agent'
  }
  if (a?.Kind === 'script') return 'Script agent'
  return 'Built-in agent'
}

/**
 * A message id the server takes ([THR2]: letters, digits, `_ . @ -`, starting with a letter or
 * digit, at most 64): made on this device, so an offline message and its later sending are one.
 */
export function newMessageId(): string {
  // getRandomValues works outside secure contexts too (randomUUID does not).
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return `m-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`
}
