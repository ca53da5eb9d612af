import { describe, expect, it } from 'vitest'
import { DEFAULT_APPROVE, DEFAULT_MAX_OUTPUT_TOKENS, llmConfigFromEnv } from '../../sync-server/engines/threads/llm-agent.js'
import { maxDepthFromEnv } from '../../sync-server/engines/threads/index.js'

describe('[THR10][THR24] LLM settings from the environment', () => {
  it('no WEFT_LLM_BASE_URL: no LLM', () => {
    expect(llmConfigFromEnv({})).toBeNull()
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: '  ' })).toBeNull()
  })
  it('defaults: model, approvals, 8 steps, 4,096 tokens, no key', () => {
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: 'http://127.0.0.1:1/v1' })).toEqual({
      baseURL: 'http://127.0.0.1:1/v1', model: 'gpt-4o-mini', approve: DEFAULT_APPROVE, maxSteps: 8, maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS,
    })
    expect(DEFAULT_MAX_OUTPUT_TOKENS).toBe(4_096)
  })
  it('reads every setting', () => {
    const c = llmConfigFromEnv({ WEFT_LLM_BASE_URL: 'http://h/v1', WEFT_LLM_API_KEY: 'k', WEFT_LLM_MODEL: 'm', WEFT_LLM_APPROVE: 'run, patch', WEFT_LLM_MAX_STEPS: '3', WEFT_LLM_MAX_TOKENS: '500' })
    expect(c).toEqual({ baseURL: 'http://h/v1', apiKey: 'k', model: 'm', approve: ['run', 'patch'], maxSteps: 3, maxOutputTokens: 500 })
    expect(llmConfigFromEnv({ WEFT_LLM_BASE_URL: 'http://h/v1', WEFT_LLM_APPROVE: '' })?.approve).toEqual([])
  })
  it('a bad setting is refused at start-up with the setting and the value named', () => {
    const base = { WEFT_LLM_BASE_URL: 'http://h/v1' }
    expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_APPROVE: 'patch,launch' })).toThrow(/WEFT_LLM_APPROVE names an unknown tool "launch"/)
    for (const bad of ['0', '-1', '2.5', 'eight', '']) {
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_STEPS: bad })).toThrow(`WEFT_LLM_MAX_STEPS must be a positive integer, got ${JSON.stringify(bad)}`)
      expect(() => llmConfigFromEnv({ ...base, WEFT_LLM_MAX_TOKENS: bad })).toThrow(`WEFT_LLM_MAX_TOKENS must be a positive integer, got ${JSON.stringify(bad)}`)
    }
  })
  it('WEFT_THREAD_MAX_DEPTH: default 4, a bad value refused', () => {
    expect(maxDepthFromEnv({})).toBe(4)
    expect(maxDepthFromEnv({ WEFT_THREAD_MAX_DEPTH: '2' })).toBe(2)
    expect(() => maxDepthFromEnv({ WEFT_THREAD_MAX_DEPTH: '0' })).toThrow(/WEFT_THREAD_MAX_DEPTH must be a positive integer/)
  })
})
