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
  /** Runs `task` in a sub-thread, as every author of the round; resolves with its outcome. */
  delegate(task: string, signal: AbortSignal): Promise<{ answer: string; question: string | null }>
}

export interface RoundIo {
  /** The round's input texts, in order. */
  messages: readonly string[]
  /** Streams `text` after what the response cell holds (resolves once applied). */
  emit(text: string): Promise<void>
  signal: AbortSignal
  clock: Clock
  tools: AgentTools
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
