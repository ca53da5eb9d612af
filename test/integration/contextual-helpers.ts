import type { JsonObject } from '../../shared/index.js'
import { afterAll, beforeAll, expect, vi } from 'vitest'
import { api, createSpace, expectStatus, signup, startTestServer, waitFor, type ApiResponse, type TestServer, type TestUser } from '../helpers/index.js'

/** A definition: Document events under `prefix`, a `reply` create reaction and an `annotate` patch. */
export function definition(prefix: string, overrides: JsonObject = {}): JsonObject {
  return {
    Operation: 'triage',
    Events: { NodeTypes: ['Document'], Kinds: ['Created', 'Updated'], PathPrefix: prefix },
    Hydration: {
      source: { Get: '{event.path}' },
      siblings: { Children: '{event.parent}', NodeType: 'Document', Limit: 10 },
    },
    Reactions: {
      reply: {
        Command: 'create',
        Target: '{event.path}/reply',
        NodeType: 'Post',
        Parameters: { Text: { Type: 'string', Required: true, MaxLength: 1000 } },
        Rejections: ['already_exists'],
      },
      annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } },
    },
    Limits: { LeaseSeconds: 30, MaxInFlight: 2, MaxAttempts: 3 },
    ...overrides,
  }
}

export interface Item {
  event: { eventId: string; version: number; path: string; kind: string; node: unknown }
  leaseToken: string
  attempt: number
  expiresAt: string
  incarnation: number
  databaseId: string
  contextHead: number
  hydration: Record<string, unknown>
  reactions: Array<{ name: string; command: string; target: string; causationToken: string }>
}

export type NextBody = { consumerId: string; item: Item | null }

/** The contextual HTTP surface for one caller. */
export function ctx(url: string, token: string) {
  const a = api(url, token)
  const post = <T>(op: string, body: unknown) => a.post<T & { error?: { code: string; message: string } }>(`/api/contextual/${op}`, body)
  return {
    next: (subscription: string, consumer = 'w1', extra: JsonObject = {}) => post<NextBody>('next', { subscription, consumer, ...extra }),
    ack: (consumerId: string, item: Item) => post<{ ok: true }>('ack', { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt }),
    nack: (consumerId: string, item: Item, delaySeconds = 0, error = 'retry') =>
      post<{ state: string }>('nack', { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt, delaySeconds, error }),
    extend: (consumerId: string, item: Item, seconds?: number) =>
      post<{ expiresAt: string }>('extend', { consumerId, eventId: item.event.eventId, leaseToken: item.leaseToken, attempt: item.attempt, ...(seconds ? { seconds } : {}) }),
    status: (consumerId: string) => post<Record<string, unknown>>('status', { consumerId }),
    redrive: (consumerId: string) => post<{ redriven: number }>('redrive', { consumerId }),
    delete: (consumerId: string) => post<{ deleted: true }>('delete', { consumerId }),
    react: (item: Item, reaction: string, params: JsonObject = {}, extra: JsonObject = {}) => {
      const r = item.reactions.find((x) => x.name === reaction)
      if (!r) throw new Error(`reaction ${reaction} not offered: ${item.reactions.map((x) => x.name).join(', ')}`)
      return post<{ outcome: Record<string, unknown>; repeated: boolean; acked?: boolean }>('react', { causationToken: r.causationToken, params, ...extra })
    },
    reactToken: (causationToken: string, params: JsonObject = {}) => post<{ outcome: Record<string, unknown>; repeated: boolean }>('react', { causationToken, params }),
  }
}

export async function putSubscription(url: string, token: string, path: string, content: JsonObject): Promise<ApiResponse<unknown>> {
  return api(url, token).putNode(path, 'ContextualSubscription', content)
}

/**
 * A `next` as an agent makes it: `503 unavailable` ("the context kept changing while it was read")
 * says pull again (its message; docs/API.md: 503 is retryable), which a loaded machine's engine
 * writes can cause on each of the server's four tries (the CI rehearsal of stop 45, on PostgreSQL).
 */
export async function nextRetrying(c: ReturnType<typeof ctx>, sub: string, consumer = 'w1', extra: JsonObject = {}) {
  for (let attempt = 1; ; attempt++) {
    const r = await c.next(sub, consumer, extra)
    if (r.status !== 503 || attempt === 5) return r
  }
}

/** Pulls until an item comes (a long poll, again on 503; the consumer exists after the first pull). */
export async function pull(url: string, token: string, sub: string, consumer = 'w1'): Promise<{ consumerId: string; item: Item }> {
  const r = expectStatus(await nextRetrying(ctx(url, token), sub, consumer, { waitSeconds: 10 }), 200)
  if (!r.body.item) throw new Error(`no item: ${JSON.stringify(r.body)}`)
  return { consumerId: r.body.consumerId, item: r.body.item }
}

/** One describe block's server, its owner and the owner's space: made before its tests, removed after. */
export interface OwnedServer {
  ts: TestServer
  owner: TestUser
  space: string
}

export function ownedServer(): OwnedServer {
  const env = { space: '' } as OwnedServer
  beforeAll(async () => {
    env.ts = await startTestServer()
    env.owner = await signup(env.ts.url)
    env.space = await createSpace(env.ts.url, env.owner.token)
  })
  afterAll(async () => env.ts.cleanup())
  return env
}

/** A subscription `{space}/s{n}` over `{space}/in{n}` (made, as `ownerToken`), its consumer made by a first pull of `token`'s caller. */
export async function subscriptionWithConsumer(url: string, ownerToken: string, space: string, n: string, token = ownerToken, overrides: JsonObject = {}) {
  const sub = `${space}/s${n}`
  const prefix = `${space}/in${n}`
  expectStatus(await putSubscription(url, ownerToken, sub, definition(prefix, overrides)), 201)
  expectStatus(await api(url, ownerToken).putNode(prefix, 'Document', {}), 201)
  const c = ctx(url, token)
  const first = expectStatus(await c.next(sub), 200).body
  return { sub, prefix, c, consumerId: first.consumerId, first }
}

/** The Messages of `thread` once its round is over and answered (Idle, Completed). */
export async function answeredThread(url: string, token: string, thread: string): Promise<string[]> {
  const t = await waitFor(async () => {
    const n = (await api(url, token).getNode(thread)).body
    return n.content.Status === 'Idle' && n.content.Disposition === 'Completed' ? n : null
  })
  return t.content.Messages as string[]
}

/**
 * [CTX42] A long poll (`POST /api/contextual/{op}` with `body`) whose client goes away while the
 * server waits: resolves once `waiting()` (the server's count of waiting polls) is back to 0.
 */
export async function abandonWhileWaiting(url: string, token: string, op: string, body: JsonObject, waiting: () => number): Promise<void> {
  const gone = new AbortController()
  const call = fetch(`${url}/api/contextual/${op}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: gone.signal,
  }).catch((e: unknown) => e)
  await vi.waitFor(() => expect(waiting()).toBe(1), { timeout: 60_000, interval: 20 })
  gone.abort()
  expect(await call).toMatchObject({ name: 'AbortError' })
  // Released once the server sees the connection close, long before the poll's own wait.
  await vi.waitFor(() => expect(waiting()).toBe(0), { timeout: 30_000, interval: 20 })
}
