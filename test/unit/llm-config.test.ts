import { describe, expect, it } from 'vitest'
import { DEFAULT_APPROVE, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_TOOL_CALLS_PER_ROUND, DEFAULT_MAX_TOOL_CALLS_PER_STEP, llmConfigFromEnv } from '../../sync-server/engines/threads/llm-agent.js'
import { maxDepthFromEnv, maxResponseCharsFromEnv } from '../../sync-server/engines/threads/index.js'

describe('[THR10][THR24] LLM settings from the environment', () => {
  it('no WEFT_LLM_BASE_URL: no LLM', () => {
    expect(llmConfigFromEnv({})).toBeNull()
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: '  ' })).toBeNull()
  })
  it('defaults: model, approvals, 8 steps, 4,096 tokens, 16 tool calls a step and 64 a round, no key', () => {
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: 'http://127.0.0.1:1/v1' })).toEqual({
      baseURL: 'http://127.0.0.1:1/v1', model: 'gpt-4o-mini', approve: DEFAULT_APPROVE, maxSteps: 8, maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
      maxToolCallsPerStep: DEFAULT_MAX_TOOL_CALLS_PER_STEP, maxToolCallsPerRound: DEFAULT_MAX_TOOL_CALLS_PER_ROUND,
    })
    expect([DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_TOOL_CALLS_PER_STEP, DEFAULT_MAX_TOOL_CALLS_PER_ROUND]).toEqual([4_096, 16, 64])
  })
  it('reads every setting', () => {
    const c = llmConfigFromEnv({
      WEFT_LLM_BASE_URL: 'http://h/v1', WEFT_LLM_API_KEY: 'k', WEFT_LLM_MODEL: 'm', WEFT_LLM_APPROVE: 'run, patch', WEFT_LLM_MAX_STEPS: '3', WEFT_LLM_MAX_TOKENS: '500',
      WEFT_LLM_MAX_TOOL_CALLS_PER_STEP: '2', WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND: '5',
    })
    expect(c).toEqual({ baseURL: 'http://h/v1', apiKey: 'k', model: 'm', approve: ['run', 'patch'], maxSteps: 3, maxOutputTokens: 500, maxToolCallsPerStep: 2, maxToolCallsPerRound: 5 })
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: 'http://h/v1', WEFT_LLM_APPROVE: '' })?.approve).toEqual([])
  })
  it('a bad setting is refused at start-up with the setting and the value named', () => {
    const base = { WEFT_LLM_BASE_URL: 'http://h/v1' }
    expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_APPROVE: 'patch,launch' })).toThrow(/WEFT_LLM_APPROVE names an unknown tool "launch"/)
    for (const bad of ['0', '-1', '2.5', 'eight', '']) {
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_STEPS: bad })).toThrow(`WEFT_LLM_MAX_STEPS must be a positive integer, got ${JSON.stringify(bad)}`)
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_TOKENS: bad })).toThrow(`WEFT_LLM_MAX_TOKENS must be a positive integer, got ${JSON.stringify(bad)}`)
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_TOOL_CALLS_PER_STEP: bad })).toThrow(`WEFT_LLM_MAX_TOOL_CALLS_PER_STEP must be a positive integer, got ${JSON.stringify(bad)}`)
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND: bad })).toThrow(`WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND must be a positive integer, got ${JSON.stringify(bad)}`)
    }
    expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_TOOL_CALLS_PER_STEP: '20', WEFT_LLM_MAX_TOOL_CALLS_PER_ROUND: '10' })).toThrow(/PER_ROUND \(10\) must be at least WEFT_LLM_MAX_TOOL_CALLS_PER_STEP \(20\)/)
  })
  it('WEFT_THREAD_MAX_DEPTH: default 4, a bad value refused', () => {
    expect(maxDepthFromEnv({})).toBe(4)
    expect(maxDepthFromEnv({ WEFT_THREAD_MAX_DEPTH: '2' })).toBe(2)
    expect(() => maxDepthFromEnv({ WEFT_THREAD_MAX_DEPTH: '0' })).toThrow(/WEFT_THREAD_MAX_DEPTH must be a positive integer/)
  })
  it('WEFT_THREAD_MAX_RESPONSE_CHARS: default 1,000,000, a bad value refused', () => {
    expect(maxResponseCharsFromEnv({})).toBe(1_000_000)
    expect(maxResponseCharsFromEnv({ WEFT_THREAD_MAX_RESPONSE_CHARS: '5000' })).toBe(5000)
    expect(() => maxResponseCharsFromEnv({ WEFT_THREAD_MAX_RESPONSE_CHARS: '1e3x' })).toThrow('WEFT_THREAD_MAX_RESPONSE_CHARS must be a positive integer, got "1e3x"')
  })
})
