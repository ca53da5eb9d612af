import { describe, expect, it } from 'vitest'
import { answeredDecision, lastStoppedCell, newMessageId, pendingApproval, threadState } from '../../web/components/thread-text.js'
import { MESSAGE_ID } from '../../sync-server/engines/threads/model.js'

describe('thread state in words', () => {
  it('[WEB31] tells the states of a thread apart, the same for every reader', () => {
    expect(threadState({ Status: 'Executing' })).toMatchObject({ kind: 'thinking', label: 'Thinking…', live: true })
    expect(threadState({ Status: 'StartingExecution' }).label).toBe('Thinking…')
    expect(threadState({ Status: 'Executing', RequestedStatus: 'Cancelled' })).toMatchObject({ kind: 'stopping', label: 'Stopping…', live: true })
    // A request on a resting thread is not "Stopping…" (the engine clears it).
    expect(threadState({ Status: 'Idle', RequestedStatus: 'Cancelled' }).kind).toBe('ready')
    expect(threadState({ Status: 'Cancelled' }).label).toBe('Cancelled')
    expect(threadState({ Status: 'Idle', Disposition: 'AwaitingInput', Question: 'Which?' }).label).toBe('Waiting for your answer')
    // A question is addressed only to those who may answer it; a list of one's threads says it needs one.
    expect(threadState({ Status: 'Idle', Disposition: 'AwaitingInput' }, { mayAnswer: false }).label).toBe('Waiting for an answer')
    expect(threadState({ Status: 'Idle', Disposition: 'AwaitingInput' }, { mayAnswer: false, inList: true }).label).toBe('Waiting for an answer')
    expect(threadState({ Status: 'Idle', Disposition: 'AwaitingInput' }, { mayAnswer: true, inList: true }).label).toBe('Needs your answer')
    expect(threadState({ Status: 'Idle', Disposition: 'AwaitingInput' }, { mayAnswer: true }).label).toBe('Waiting for your answer')
    expect(threadState({ Status: 'Idle', Disposition: 'Failed' }).kind).toBe('failed')
    expect(threadState({ Status: 'Idle', Disposition: 'Completed' }).label).toBe('Answered')
    expect(threadState({ Status: 'Idle', PendingUserMessages: ['T/a'] }).kind).toBe('queued')
    expect(threadState({}).label).toBe('Ready')
    expect(threadState({ Status: 'Executing', PendingApproval: { Id: 'a', Tool: 'patch' } }).label).toBe('Waiting for approval')
  })

  it('[WEB75] names the cell of a last round the thread says was stopped, and no other', () => {
    const messages = ['T/a', 'T/_r.a', 'T/b', 'T/_r.b']
    expect(lastStoppedCell({ Status: 'Cancelled', Messages: messages })).toBe('T/_r.b')
    // Not stopped, or stopped before the round began (its input back as waiting): none.
    expect(lastStoppedCell({ Status: 'Idle', Disposition: 'Completed', Messages: messages })).toBeNull()
    expect(lastStoppedCell({ Status: 'Cancelled', Messages: ['T/a', 'T/_r.a'], PendingUserMessages: ['T/b'] })).toBeNull()
    expect(lastStoppedCell({ Status: 'Cancelled' })).toBeNull()
  })

  it('[WEB36] reads a pending approval and the answer given to it, and nothing else', () => {
    expect(pendingApproval({ PendingApproval: null })).toBeNull()
    expect(pendingApproval({ PendingApproval: { Tool: 'x' } })).toBeNull()
    expect(pendingApproval({ PendingApproval: { Id: 'a', Tool: 'patch', Args: { p: 1 }, Summary: 'S', RequestedAt: '2026-01-01T00:00:00Z' } })).toEqual({ Id: 'a', Tool: 'patch', Args: { p: 1 }, Summary: 'S', RequestedAt: '2026-01-01T00:00:00Z' })
    expect(answeredDecision({ ApprovalAnswer: { Id: 'a', Decision: 'Denied' } }, 'a')).toBe('Denied')
    // An answer to an earlier approval is not an answer to this one.
    expect(answeredDecision({ ApprovalAnswer: { Id: 'old', Decision: 'Approved' } }, 'a')).toBeNull()
    expect(answeredDecision({ ApprovalAnswer: { Id: 'a', Decision: 'Maybe' } }, 'a')).toBeNull()
  })

  it('[WEB33] a message id made on the device is one the server takes, and a new one each time', () => {
    const ids = new Set(Array.from({ length: 200 }, () => newMessageId()))
    expect(ids.size).toBe(200)
    for (const id of ids) expect(id).toMatch(MESSAGE_ID)
  })
})
