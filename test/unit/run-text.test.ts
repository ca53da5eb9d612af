import { describe, expect, it } from 'vitest'
import { lineTime } from '../../web/components/run-log-text.js'
import { formatWhen } from '../../web/components/run-text.js'

describe('a run\'s times in words', () => {
  it('the start and end of a run read like the log\'s lines (one clock on one page, 24-hour)', () => {
    const now = new Date()
    const evening = new Date(now.getFullYear(), now.getMonth(), now.getDate(), 18, 14, 42).toISOString()
    expect(lineTime(evening)).toBe('18:14:42')
    expect(formatWhen(evening, now)).toBe('today 18:14:42')
    const earlier = new Date(2026, 0, 5, 7, 3, 9).toISOString()
    expect(formatWhen(earlier, now)).toMatch(/ 07:03:09$/)
    expect(formatWhen('not a time', now)).toBe('')
  })
})
