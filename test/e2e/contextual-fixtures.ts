import { expect, test } from '@playwright/test'
import { adminAndViewerOn, api, putNode, startE2eServer, type E2eServer, type TestUser } from './fixtures.js'

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
  await deadLetter(server, ann, vic, sub, 'Ops/inbox/report', 'Q3 report', error)
}

/** Ann adds the Document `path` named `title` to the inbox, and Vic's worker fails it with `error`: one more dead letter. */
export async function deadLetter(server: E2eServer, ann: TestUser, vic: TestUser, sub: string, path: string, title: string, error: string): Promise<void> {
  await putNode(server, ann, path, 'Document', { Title: title }, title)
  const pulled = await api<{ consumerId: string; item: { event: { eventId: string }; leaseToken: string; attempt: number } }>(server, vic, 'POST', '/api/contextual/next', { subscription: sub, consumer: 'vic-worker', waitSeconds: 20 })
  const { consumerId, item } = pulled.body
  const nack = await api<{ state: string }>(server, vic, 'POST', '/api/contextual/nack', { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt, error })
  expect(nack.body.state).toBe('dead')
}

/**
 * A spec's server (made before its tests, disposed after): Ann an Admin of `Ops`, Vic a Viewer,
 * and the triage subscription at `sub` whose consumer `vic-worker` holds one dead letter
 * ("Q3 report", failed with `error`), then whatever `more` adds.
 */
export function triageSpec(sub: string, error: string, more?: (env: TriageSpec) => Promise<void>): TriageSpec {
  const env = {} as TriageSpec
  test.beforeAll(async () => {
    env.server = await startE2eServer()
    ;({ ann: env.ann, vic: env.vic } = await adminAndViewerOn(env.server, 'Ops', { inbox: {} }))
    await triageWithDeadLetter(env.server, env.ann, env.vic, sub, error)
    await more?.(env)
  })
  test.afterAll(async () => {
    await env.server?.dispose()
  })
  return env
}

export interface TriageSpec {
  server: E2eServer
  ann: TestUser
  vic: TestUser
}
