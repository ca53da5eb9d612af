import type * as AiSdk from 'ai'
import type * as ProviderSdk from '@ai-sdk/openai-compatible'
import type { ModelMessage, ToolResultPart, ToolSet } from 'ai'
import type { z } from 'zod'
import { WeftError, type JsonValue } from '../../../shared/index.js'
import type { Agent, RoundIo, ToolCallRecord } from './builtin-agent.js'
import { TOOL_ARGS, TOOL_DESCRIPTIONS, isToolName, type ToolName } from './round-tools.js'
import { createHash } from 'node:crypto'
import { cutText } from '../../../shared/storable-text.js'

/**
 * [THR13] The id a person answers an approval by: the model's tool call id, or, past the 200
 * characters an answer may name (`ApprovalAnswer.Id`), a digest of it (a model's longer id made
 * the approval impossible to answer, and the round waited for ever).
 */
function approvalId(id: string): string {
  return id.length <= 200 ? id : `call_${createHash('sha256').update(id).digest('hex').slice(0, 40)}`
}

/**
 * [THR10]–[THR15] The LLM agent (`Agent: { Kind: "llm", Model?, Approve? }`) on the Vercel AI SDK
 * with an OpenAI-compatible provider (OpenAI, Ollama, vLLM, LM Studio), configured by environment:
 * WEFT_LLM_BASE_URL, WEFT_LLM_API_KEY, WEFT_LLM_MODEL, WEFT_LLM_APPROVE, WEFT_LLM_MAX_STEPS,
 * WEFT_LLM_MAX_TOKENS, WEFT_LLM_MAX_TOOL_CALLS_PER_STEP, WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND.
 *
 * The loop is ours, one model step at a time (the SDK streams a step; its tools have no
 * `execute`): text deltas stream into the response cell, tool calls are recorded on the cell
 * (`ToolCalls`), then each is authorized as the round's authority and run — after a person's
 * approval when its tool needs one — and the results go back to the model. Everything a resumed
 * round needs is on the nodes: the cell's text and ToolCalls, the thread's PendingApproval.
 */

export interface LlmConfig {
  baseURL: string
  apiKey?: string
  model: string
  /** Tools whose calls wait for a person's approval (a thread's `Agent.Approve` overrides). */
  approve: readonly string[]
  /** Model steps per round at most (each step may call tools). */
  maxSteps: number
  /** [THR24] Tokens a model step may generate (the SDK's `maxOutputTokens`); default 4,096. */
  maxOutputTokens?: number
  /** [THR24] Tool calls one step may ask for (default 16) and a round may make (default 64). */
  maxToolCallsPerStep?: number
  maxToolCallsPerRound?: number
}

/** [THR24] Defaults: a step's reply fits a long answer; 16 calls a step, 64 a round (8 steps × 8). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4_096
export const DEFAULT_MAX_TOOL_CALLS_PER_STEP = 16
export const DEFAULT_MAX_TOOL_CALLS_PER_ROUND = 64

export const DEFAULT_APPROVE: readonly ToolName[] = ['patch', 'create', 'run']

/** The LLM settings from the environment; null when WEFT_LLM_BASE_URL is not set. */
export function llmConfigFromEnv(env: NodeJS.ProcessEnv = process.env): LlmConfig | null {
  const baseURL = env.WEFT_LLM_BASE_URL?.trim()
  if (!baseURL) return null
  const steps = positiveInt(env, 'WEFT_LLM_MAX_STEPS', 8)
  const tokens = positiveInt(env, 'WEFT_LLM_MAX_TOKENS', DEFAULT_MAX_OUTPUT_TOKENS)
  const perStep = positiveInt(env, 'WEFT_LLM_MAX_TOOL_CALLS_PER_STEP', DEFAULT_MAX_TOOL_CALLS_PER_STEP)
  const perRound = positiveInt(env, 'WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND', DEFAULT_MAX_TOOL_CALLS_PER_ROUND)
  if (perRound < perStep) throw new Error(`WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND (${perRound}) must be at least WEFT_LLM_MAX_TOOL_CALLS_PER_STEP (${perStep})`)
  const approve = env.WEFT_LLM_APPROVE === undefined ? DEFAULT_APPROVE : env.WEFT_LLM_APPROVE.split(',').map((s) => s.trim()).filter(Boolean)
  for (const t of approve) if (!isToolName(t)) throw new Error(`WEFT_LLM_APPROVE names an unknown tool ${JSON.stringify(t)} (tools: ${Object.keys(TOOL_ARGS).join(', ')})`)
  return {
    baseURL,
    ...(env.WEFT_LLM_API_KEY ? { apiKey: env.WEFT_LLM_API_KEY } : {}),
    model: env.WEFT_LLM_MODEL?.trim() || 'gpt-4o-mini',
    approve,
    maxSteps: steps,
    maxOutputTokens: tokens,
    maxToolCallsPerStep: perStep,
    maxToolCallsPerRound: perRound,
  }
}

/** A positive integer setting (unset: `fallback`); anything else is refused at start-up, naming the setting and the value. */
export function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  const n = raw === undefined ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`)
  return n
}

const SYSTEM_PROMPT =
  'You are the agent of a Weft thread: people and you work in rounds on a mesh of JSON nodes addressed by paths. ' +
  'Use the tools to read, query, change, create and run nodes; a refused or denied call returns an error: say so plainly. Answer concisely.'

/**
 * The SDK, loaded on the first LLM round (about 2 s of import on a busy machine): a server with
 * no LLM rounds, or none configured, never pays for it at start-up.
 */
type Sdk = { ai: typeof AiSdk; provider: typeof ProviderSdk }
let sdk: Promise<Sdk> | null = null
function loadSdk(): Promise<Sdk> {
  sdk ??= Promise.all([import('ai'), import('@ai-sdk/openai-compatible')]).then(([ai, provider]) => ({ ai, provider }))
  return sdk
}

function tools(tool: Sdk['ai']['tool']): ToolSet {
  const set: ToolSet = {}
  for (const name of Object.keys(TOOL_ARGS) as ToolName[]) set[name] = tool({ description: TOOL_DESCRIPTIONS[name], inputSchema: TOOL_ARGS[name] as z.ZodObject })
  return set
}

function summary(call: ToolCallRecord): string {
  const args = JSON.stringify(call.Args) ?? ''
  return `${call.Tool} ${args.length > 300 ? `${cutText(args, 300)}…` : args}`
}

function output(call: ToolCallRecord): ToolResultPart['output'] {
  if (call.Status === 'Done') return { type: 'json', value: (call.Result ?? null) as never }
  return { type: 'error-text', value: call.Error ?? 'The call did not run.' }
}

/** A step's assistant message: what it said before its tool calls, then the calls. */
function assistantMessage(said: string, calls: readonly ToolCallRecord[]): ModelMessage {
  return {
    role: 'assistant',
    content: [...(said ? [{ type: 'text' as const, text: said }] : []), ...calls.map((c) => ({ type: 'tool-call' as const, toolCallId: c.Id, toolName: c.Tool, input: c.Args }))],
  }
}

/** A step's tool message: the results of its (settled) calls. */
function toolMessage(calls: readonly ToolCallRecord[]): ModelMessage {
  return { role: 'tool', content: calls.map((c) => ({ type: 'tool-result' as const, toolCallId: c.Id, toolName: c.Tool, output: output(c) })) }
}

/** The model messages of the round's earlier steps, from the cell's text and ToolCalls. */
function replay(text: string, calls: readonly ToolCallRecord[]): ModelMessage[] {
  const out: ModelMessage[] = []
  let at = 0
  const steps = [...new Set(calls.map((c) => c.Step))].sort((a, b) => a - b)
  for (const step of steps) {
    const these = calls.filter((c) => c.Step === step)
    const end = Math.max(at, these[0]!.TextAt)
    const said = text.slice(at, end)
    at = end
    out.push(assistantMessage(said, these))
    const done = these.filter((c) => c.Status === 'Done' || c.Status === 'Error' || c.Status === 'Denied')
    if (done.length === these.length) out.push(toolMessage(these))
  }
  return out
}

function errorText(err: unknown): string {
  return err instanceof WeftError ? `${err.code}: ${err.message}` : (err as Error).message
}

export function createLlmAgent(config: LlmConfig): Agent {
  const setup = loadSdk().then(({ ai, provider }) => ({
    streamText: ai.streamText,
    provider: provider.createOpenAICompatible({ name: 'weft-llm', baseURL: config.baseURL, ...(config.apiKey ? { apiKey: config.apiKey } : {}) }),
    toolSet: tools(ai.tool),
  }))
  // Loading is started here; a failure surfaces in the round that needs it.
  setup.catch(() => undefined)
  return async (io: RoundIo) => {
    const { streamText, provider, toolSet } = await setup
    const model = provider.chatModel(typeof io.agent.Model === 'string' && io.agent.Model !== '' ? io.agent.Model : config.model)
    const approve = new Set(Array.isArray(io.agent.Approve) ? io.agent.Approve.filter((t): t is string => typeof t === 'string') : config.approve)
    const calls: ToolCallRecord[] = io.response.toolCalls.map((c) => ({ ...c }))
    let text = io.response.text
    // A resumed round: what the cell holds is its past (the emit skips what is there).
    if (text !== '') await io.emit(text)
    const messages: ModelMessage[] = [
      ...io.history.map((h): ModelMessage => (h.role === 'assistant' ? { role: 'assistant', content: h.text } : { role: 'user', content: h.role === 'tool' ? `[tool] ${h.text}` : h.text })),
      ...io.messages.map((m): ModelMessage => ({ role: 'user', content: m })),
      ...replay(text, calls),
    ]
    const record = () => io.tools.recordToolCalls(calls)

    /** [THR11][THR13] One call: authorized as the round (and its approver), after approval when needed. */
    const settle = async (call: ToolCallRecord): Promise<void> => {
      try {
        if (approve.has(call.Tool) && call.Status !== 'Approved') {
          // Nothing the round may not do is put to a person.
          await io.tools.authorize(call.Tool, call.Args, [])
          call.Status = 'AwaitingApproval'
          await record()
          const answer = await io.tools.approval({ Id: approvalId(call.Id), Tool: call.Tool, Args: call.Args, Summary: summary(call) }, io.signal)
          if (answer.decision === 'Denied') {
            call.Status = 'Denied'
            call.Error = `denied by ${answer.by}`
            return
          }
          call.Status = 'Approved'
          call.ApprovedBy = answer.by
          await record()
        }
        call.Result = await io.tools.call(call.Tool, call.Args, call.ApprovedBy ? [call.ApprovedBy] : [], io.signal, call.Id)
        call.Status = 'Done'
      } catch (err) {
        if (io.signal.aborted) {
          // [THR6] Cancelled before it ran (waiting for approval, or mid-call): the cell says so;
          // the terminal write clears the thread's approval fields, so a late answer has none to answer.
          if (call.Status !== 'Done') {
            call.Error = call.Status === 'AwaitingApproval' ? 'cancelled while waiting for approval' : 'cancelled'
            call.Status = 'Error'
            await record().catch(() => undefined)
          }
          throw err
        }
        call.Status = 'Error'
        call.Error = errorText(err)
      } finally {
        if (!io.signal.aborted) await record()
      }
    }

    let step = calls.reduce((m, c) => Math.max(m, c.Step + 1), 0)
    // Calls of the last step not yet settled (a restart, or a pause for approval) go first.
    const open = calls.filter((c) => c.Status === 'Pending' || c.Status === 'AwaitingApproval' || c.Status === 'Approved')
    if (open.length > 0) {
      for (const c of open) await settle(c)
      const last = open[0]!.Step
      const these = calls.filter((c) => c.Step === last)
      messages.push(toolMessage(these))
    }
    const perStep = config.maxToolCallsPerStep ?? DEFAULT_MAX_TOOL_CALLS_PER_STEP
    const perRound = config.maxToolCallsPerRound ?? DEFAULT_MAX_TOOL_CALLS_PER_ROUND
    const maxOutputTokens = config.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS
    // Steps are numbered from 0 in the round (a resumed round goes on counting).
    for (; step < config.maxSteps; step++) {
      const result = streamText({ model, system: SYSTEM_PROMPT, messages, tools: toolSet, abortSignal: io.signal, maxRetries: 0, maxOutputTokens })
      const stepStart = text.length
      const stepCalls: ToolCallRecord[] = []
      for await (const part of result.fullStream) {
        if (part.type === 'text-delta') {
          text += part.text
          await io.emit(part.text)
        } else if (part.type === 'tool-call') {
          stepCalls.push({ Id: part.toolCallId, Tool: part.toolName, Args: (part.input ?? null) as JsonValue, Step: step, TextAt: 0, Status: 'Pending' })
        } else if (part.type === 'error') {
          throw part.error instanceof Error ? part.error : new Error(String(part.error))
        } else if (part.type === 'abort') {
          io.signal.throwIfAborted()
          throw new Error('The model stream was aborted.')
        }
      }
      const said = text.slice(stepStart)
      if (stepCalls.length === 0) return { disposition: 'Completed' }
      // [THR24] Bounds on what one reply may set going: refused whole, before any call runs.
      if (stepCalls.length > perStep) {
        return { disposition: 'Failed', error: `The model asked for ${stepCalls.length} tool calls in one step; at most ${perStep} are run (none of these ran).` }
      }
      if (calls.length + stepCalls.length > perRound) {
        return { disposition: 'Failed', error: `The round would make ${calls.length + stepCalls.length} tool calls; at most ${perRound} a round (the last step's did not run).` }
      }
      for (const c of stepCalls) c.TextAt = text.length
      calls.push(...stepCalls)
      await record()
      messages.push(assistantMessage(said, stepCalls))
      for (const c of stepCalls) await settle(c)
      messages.push(toolMessage(stepCalls))
    }
    return { disposition: 'Failed', error: `The agent used its ${config.maxSteps} steps without finishing (WEFT_LLM_MAX_STEPS).` }
  }
}
