import { describe, expect, it } from 'vitest'
import { ActivityStatus, activityParentPath, finalStatusOf, finish, isTerminal, maxStatus, mergeInputs, missingInputs, type ActivityStatus as Status } from '../../shared/index.js'

const msg = (Level: string) => ({ Level, Text: Level, At: '2026-01-01T00:00:00.000Z' })
const logs: Record<string, object[]> = {
  none: [],
  info: [msg('Info')],
  warning: [msg('Info'), msg('Warning')],
  error: [msg('Warning'), msg('Error')],
}
const fromMessages: Record<string, Status> = { none: 'Succeeded', info: 'Succeeded', warning: 'Warning', error: 'Failed' }

describe('[ACT3] finish(log, floor): Status = max(floor, what the messages say)', () => {
  for (const floor of ActivityStatus.members) {
    for (const [name, messages] of Object.entries(logs)) {
      const natural = floor === 'Running' ? 'Succeeded' : floor
      const expected = ActivityStatus.number[natural] >= ActivityStatus.number[fromMessages[name]!] ? natural : fromMessages[name]
      it(`floor ${floor}, messages ${name} → ${expected}`, () => {
        const out = finish({ Category: 'x', Messages: messages as never }, floor, '2026-01-01T00:00:01.000Z')
        expect(out.Status).toBe(expected)
        expect(out.End).toBe('2026-01-01T00:00:01.000Z')
        expect(out.Category).toBe('x')
      })
    }
  }

  it('an error appended after a finish is read by the next finish (the seed\'s re-Finish rule)', () => {
    const first = finish({ Messages: [] }, 'Succeeded')
    expect(first.Status).toBe('Succeeded')
    expect(finish({ ...first, Messages: [msg('Error')] }, 'Succeeded').Status).toBe('Failed')
  })

  it('order and helpers', () => {
    expect(ActivityStatus.members).toEqual(['Running', 'Succeeded', 'Warning', 'Failed', 'Cancelled'])
    expect(maxStatus('Warning', 'Failed')).toBe('Failed')
    expect(maxStatus('Cancelled', 'Failed')).toBe('Cancelled')
    expect(finalStatusOf(undefined)).toBe('Succeeded')
    expect(isTerminal('Running')).toBe(false)
    expect(isTerminal(undefined)).toBe(false)
    for (const s of ['Succeeded', 'Warning', 'Failed', 'Cancelled']) expect(isTerminal(s)).toBe(true)
  })
})

describe('[ACT1][ACT6] inputs and routing', () => {
  const code = { Inputs: { a: { Type: 'number', Default: 1 }, b: { Type: 'string', Required: true } } }
  it('defaults merged with inputs; required inputs named', () => {
    expect(mergeInputs(code, { b: 'x' })).toEqual({ a: 1, b: 'x' })
    expect(missingInputs(code, mergeInputs(code, {}))).toEqual(['b'])
  })
  it('ActivityParentPath, then the partition default, then the partition root; {viewer} is the caller', () => {
    expect(activityParentPath('Doc/tools/x', { ActivityParentPath: '{viewer}' }, { DefaultActivityParentPath: 'Doc/runs' }, 'u1')).toBe('u1')
    expect(activityParentPath('Doc/tools/x', {}, { DefaultActivityParentPath: '{viewer}' }, 'u1')).toBe('u1')
    expect(activityParentPath('Doc/tools/x', {}, { DefaultActivityParentPath: 'Doc/runs' }, 'u1')).toBe('Doc/runs')
    expect(activityParentPath('Doc/tools/x', {}, null, 'u1')).toBe('Doc')
  })
})
