import { expect } from '@playwright/test'
import { api, putNode, type E2eServer, type TestUser } from './fixtures.js'

/** A triage subscription on `Ops/inbox` whose events get one attempt (the first failure dead-letters). */
export const TRIAGE_DEFINITION = {
  Operation: 'triage',
  Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: 'Ops/inbox' },
  Reactions: { note: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 },
}

/**
 * Ann (Admin of `Ops`) makes the subscription at `sub`; Vic's worker `vic-worker` pulls (its
 * consumer is made), Ann adds "Q3 report" to the inbox, and Vic's worker fails it with `error`:
 * one dead letter.
 */
export async function triageWithDeadLetter(server: E2eServer, ann: TestUser, vic: TestUser, sub: string, error: string): Promise<void> {
  await putNode(server, ann, sub, 'ContextualSubscription', TRIAGE_DEFINITION, 'Triage')
  expect((await api(server, vic, 'POST', '/api/contextual/next', { subscription: sub, consumer: 'vic-worker' })).status).toBe(200)
  await putNode(server, ann, 'Ops/inbox/report', 'Document', { Title: 'Q3 report' }, 'Q3 report')
  const pulled = await api<{ consumerId: string; item: { event: { eventId: string }; leaseToken: string; attempt: number } }>(server, vic, 'POST', '/api/contextual/next', { subscription: sub, consumer: 'vic-worker', waitSeconds: 20 })
  const { consumerId, item } = pulled.body
  const nack = await api<{ state: string }>(server, vic, 'POST', '/api/contextual/nack', { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt, error })
  expect(nack.body.state).toBe('dead')
}
