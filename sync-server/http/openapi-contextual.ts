/**
 * [CTX30] The contextual subscriptions part of the OpenAPI document (issue 19; docs/API.md
 * "Contextual agent subscriptions"): `POST /api/contextual/{operation}`, one per service function.
 */
import { CONTEXTUAL_BOUNDS, ContextualCommands, ContextualEventKinds } from '../../shared/index.js'

const { maxWaitSeconds, maxNackDelaySeconds, leaseSeconds } = CONTEXTUAL_BOUNDS

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: unknown) => ({ 'application/json': { schema } })
const error = (description: string) => ({ description, content: json(ref('Error')) })
const bearer = [{ bearer: [] }]

const fenceProps = {
  consumerId: { type: 'string' },
  eventId: { type: 'string', description: 'The stable event id (the change version that made the event).' },
  leaseToken: { type: 'string' },
  attempt: { type: 'integer', minimum: 1 },
} as const
const fenceRequired = ['consumerId', 'eventId', 'leaseToken', 'attempt']

export const CONTEXTUAL_SCHEMAS = {
  ContextualFence: { type: 'object', additionalProperties: false, required: fenceRequired, properties: fenceProps },
  ContextualReaction: {
    type: 'object',
    required: ['name', 'command', 'target', 'parameters', 'rejections', 'causationToken'],
    properties: {
      name: { type: 'string' },
      command: { type: 'string', enum: [...ContextualCommands] },
      target: { type: 'string', description: 'The node path the command acts on.' },
      parameters: { type: 'object', description: 'The declared parameter schema: `{ name: { Type, Required?, MaxLength? } }`.' },
      rejections: { type: 'array', items: { type: 'string' }, description: 'Error codes that end as a `rejected` outcome.' },
      causationToken: { type: 'string', description: 'Opaque, sealed by the server (AES-256-GCM); pass it to react unchanged.' },
    },
  },
  ContextualWorkItem: {
    type: 'object',
    required: ['event', 'leaseToken', 'attempt', 'expiresAt', 'databaseId', 'incarnation', 'contextHead', 'hydration', 'reactions'],
    properties: {
      event: {
        type: 'object',
        required: ['eventId', 'version', 'path', 'nodeType', 'kind', 'node'],
        properties: {
          eventId: { type: 'string' },
          version: { type: 'integer' },
          path: { type: 'string' },
          nodeType: { type: 'string' },
          kind: { type: 'string', enum: [...ContextualEventKinds] },
          node: { description: 'The node as the caller reads it now (null when deleted or no longer readable).', oneOf: [ref('MeshNode'), { type: 'null' }] },
          causedBy: {
            type: 'object',
            description: 'Present when the change was committed by a contextual reaction whose subscription you can read: skip your own echoes by it (`subscription` and `consumerId` yours).',
            required: ['subscription', 'consumerId', 'consumerName', 'reaction', 'eventId', 'rootRequestId'],
            properties: { subscription: { type: 'string' }, consumerId: { type: 'string' }, consumerName: { type: 'string' }, reaction: { type: 'string' }, eventId: { type: 'string', description: 'The event the reaction was made for.' }, rootRequestId: { type: 'string' } },
          },
        },
      },
      leaseToken: { type: 'string' },
      attempt: { type: 'integer', minimum: 1 },
      expiresAt: { type: 'string', format: 'date-time' },
      databaseId: { type: 'string' },
      incarnation: { type: 'integer' },
      contextHead: { type: 'integer', description: 'The version every hydration read sees; at least the event version.' },
      hydration: { type: 'object', additionalProperties: { oneOf: [ref('MeshNode'), { type: 'null' }, { type: 'array', items: ref('MeshNode') }] } },
      reactions: { type: 'array', items: ref('ContextualReaction') },
    },
  },
  ContextualOutcome: {
    type: 'object',
    required: ['status', 'reaction', 'eventId', 'path', 'version', 'rootRequestId', 'childRequestId'],
    properties: {
      status: { type: 'string', enum: ['committed', 'rejected'] },
      reaction: { type: 'string' },
      eventId: { type: 'string' },
      path: { type: 'string' },
      version: { type: ['integer', 'null'], description: 'The commit version of the command (null when it committed no node change).' },
      code: { type: 'string', description: 'For `rejected`: the declared rejection code.' },
      message: { type: 'string' },
      rootRequestId: { type: 'string' },
      childRequestId: { type: 'string', description: 'The nested command\'s request id, derived by the server.' },
    },
  },
  ContextualStatus: {
    type: 'object',
    required: ['consumerId', 'subscription', 'name', 'pending', 'leased', 'acked', 'dead', 'cursor', 'headVersion', 'lag', 'deadLetters'],
    properties: {
      consumerId: { type: 'string' },
      subscription: { type: 'string' },
      name: { type: 'string' },
      pending: { type: 'integer' },
      leased: { type: 'integer' },
      acked: { type: 'integer' },
      dead: { type: 'integer' },
      cursor: { type: 'integer' },
      headVersion: { type: 'integer' },
      lag: { type: 'integer' },
      deadLetters: {
        type: 'array',
        items: { type: 'object', properties: { eventId: { type: 'string' }, path: { type: 'string' }, kind: { type: 'string', description: 'Created, Updated or Deleted.' }, attempt: { type: 'integer' }, lastError: { type: ['string', 'null'] }, diedAt: { type: ['string', 'null'], format: 'date-time', description: 'When it died; null for one that died before the server kept the time.' } } },
      },
      current: { type: 'boolean', description: 'Made for the definition the subscription holds now; false: an earlier one (stale: its leased events and dead letters stay with it; the consumer under the same name now continues from it).' },
      definitionHash: { type: 'string', description: 'The hash of the definition the consumer was made for.' },
      createdAt: { type: 'string', format: 'date-time' },
    },
  },
} as const

const c4xx = {
  '400': error('`invalid_request`: the body does not fit the shape.'),
  '401': error('`unauthorized`.'),
  '404': error('`not_found`: no such consumer of the caller.'),
  '409': error('`stale_lease`: the evidence is not the current lease (expired, taken by a later attempt, or settled).'),
} as const

function op(summary: string, description: string, body: unknown, ok: unknown, extra: Record<string, unknown> = {}) {
  return {
    post: {
      summary,
      description,
      security: bearer,
      requestBody: { required: true, content: json(body) },
      responses: { '200': { description: 'OK', content: json(ok) }, ...c4xx, ...extra },
    },
  }
}

export const CONTEXTUAL_PATHS = {
  '/api/contextual/next': op(
    'Lease at most one event of a consumer (long poll).',
    `Creates the consumer on first use (identity: definition hash, operation, canonical params, consumer name; owned by the caller). Leases one due event the caller may read, with a fresh hydration in one view and the reactions the caller may run now; \`item\` is null when none came within \`waitSeconds\` (0–${maxWaitSeconds}) or MaxInFlight leases are held.`,
    {
      type: 'object',
      additionalProperties: false,
      required: ['subscription', 'consumer'],
      properties: { subscription: { type: 'string' }, consumer: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,64}$' }, params: { type: 'object' }, waitSeconds: { type: 'number', minimum: 0, maximum: maxWaitSeconds } },
    },
    { type: 'object', required: ['consumerId', 'item'], properties: { consumerId: { type: 'string' }, item: { oneOf: [ref('ContextualWorkItem'), { type: 'null' }] } } },
    {
      '403': error('`forbidden`: the consumer name is another user\'s, or you cannot read the PathPrefix.'),
      '404': error('`not_found`: no subscription there you can read, or the consumer was deleted while this pull waited.'),
      '422': error('A definition that breaks a bound (`contextual_*`), consumer params that do not fit (`invalid_params`), a context over 2 MB (`contextual_too_many_rows`), or a 1,001st consumer of yours (`contextual_too_many_consumers`: delete one).'),
      '429': error('`rate_limited`: 64 long polls of yours wait already.'),
    },
  ),
  '/api/contextual/ack': op('Acknowledge a work item (fenced by lease token and attempt).', 'Settles the event for good. Acknowledge only after protected work is durable.', ref('ContextualFence'), {
    type: 'object',
    properties: { ok: { const: true }, state: { const: 'acked' }, repeated: { type: 'boolean', description: 'The item was acked already under this very lease token and attempt (your earlier ack\'s answer was lost); another token or attempt is 409 `stale_lease`.' } },
  }),
  '/api/contextual/nack': op(
    'Negative-acknowledge: retry after a bounded delay, or dead-letter after the last attempt.',
    `The event becomes due again after \`delaySeconds\` (0–${maxNackDelaySeconds}); when this was attempt MaxAttempts it becomes a dead letter with \`error\` as its last error.`,
    { type: 'object', additionalProperties: false, required: fenceRequired, properties: { ...fenceProps, delaySeconds: { type: 'number', minimum: 0, maximum: maxNackDelaySeconds }, error: { type: 'string', maxLength: 2000 } } },
    { type: 'object', properties: { state: { type: 'string', enum: ['pending', 'dead'] } } },
  ),
  '/api/contextual/extend': op(
    'Extend a lease (heartbeat).',
    `The lease runs \`seconds\` (${leaseSeconds.min}–${leaseSeconds.max}; default the definition's LeaseSeconds) from now.`,
    { type: 'object', additionalProperties: false, required: fenceRequired, properties: { ...fenceProps, seconds: { type: 'integer', minimum: leaseSeconds.min, maximum: leaseSeconds.max } } },
    { type: 'object', properties: { expiresAt: { type: 'string', format: 'date-time' } } },
  ),
  '/api/contextual/status': op('A consumer\'s state: counts, cursor, lag, dead letters.', 'Only the consumer\'s owner.', { type: 'object', required: ['consumerId'], properties: { consumerId: { type: 'string' } } }, ref('ContextualStatus')),
  '/api/contextual/redrive': op(
    'Re-drive a consumer\'s dead letters, or one of them (an Admin of the subscription).',
    'Every dead letter (with `eventId`: only that one) becomes pending again with its attempts starting over. A consumer of an earlier definition hands them to the consumer that continues it. Many letters are re-driven in batches of 500, each its own transaction; `redriven` counts them all.',
    { type: 'object', additionalProperties: false, required: ['consumerId'], properties: { consumerId: { type: 'string', maxLength: 100 }, eventId: { type: 'string', minLength: 1, maxLength: 40, description: 'Only this dead letter (an eventId of the status\'s deadLetters).' } } },
    { type: 'object', properties: { redriven: { type: 'integer' } } },
    {
      '403': error('`forbidden`: your own consumer, and not an Admin (ManageAccess) of the subscription node.'),
      '404': error('`not_found`: no such consumer you may see (another\'s, and you are no Admin of its subscription), or the consumer holds no event `eventId`.'),
      '409': error('`contextual_not_dead_letter`: the consumer holds event `eventId` but it is not a dead letter (pending, leased or settled); nothing changed.'),
    },
  ),
  '/api/contextual/delete': op(
    'Delete a consumer and its events (its owner, or an Admin of the subscription).',
    'Its leases are void at once and its events forgotten; the outcomes of its reactions (the causation records) are kept. A later `next` naming it makes it again, at the head of the change log. An account has at most 1,000 consumers (`contextual_too_many_consumers` on `next` past it): delete the ones you no longer use.',
    { type: 'object', required: ['consumerId'], properties: { consumerId: { type: 'string' } } },
    { type: 'object', properties: { deleted: { type: 'boolean', enum: [true] } } },
    { '404': error('`not_found`: no such consumer you may see (another\'s, and you are no Admin (ManageAccess) of its subscription: the same answer as for none).') },
  ),
  '/api/contextual/mine': op(
    'Your consumers over every subscription, a page at a time.',
    'Each with `current`: its subscription node is there, readable by you, and holds the definition the consumer was made for. A consumer that is not current gets no more work; delete it to free its place under the bound of 1,000 (`total` counts them all). Pages go by consumer id: pass the answer\'s `next` as `after`.',
    { type: 'object', additionalProperties: false, properties: { after: { type: 'string', maxLength: 100 }, limit: { type: 'integer', minimum: 1, maximum: 100, default: 100 } } },
    {
      type: 'object',
      required: ['consumers', 'total', 'next'],
      properties: {
        consumers: {
          type: 'array',
          items: {
            type: 'object',
            required: ['consumerId', 'subscription', 'name', 'createdAt', 'current'],
            properties: { consumerId: { type: 'string' }, subscription: { type: 'string' }, name: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' }, current: { type: 'boolean' } },
          },
        },
        total: { type: 'integer' },
        next: { type: ['string', 'null'] },
      },
    },
    {},
  ),
  '/api/contextual/react': op(
    'Run one offered reaction, exactly once in effect.',
    'Verifies the sealed causation token against durable lease truth and the caller\'s current access, derives the idempotency key, and commits the command with its outcome and causation record in one transaction. A repeat returns the persisted outcome (`repeated: true`), even after the lease or token expired; an expired token never commits anything new. With `ack` and `next`, the item is settled with the reaction and the consumer\'s next item pulled in the same call.',
    {
      type: 'object',
      additionalProperties: false,
      required: ['causationToken'],
      properties: {
        causationToken: { type: 'string', maxLength: 4096 },
        params: { type: 'object' },
        ack: { type: 'boolean', description: 'Settle (ack) the work item in the reaction\'s own transaction: no ack call after it, and no crash between the two.' },
        next: { type: 'boolean', description: 'With `ack: true`: pull the consumer\'s next work item once this one is settled, in the same call (`next` in the answer): a worker\'s loop is one call per item.' },
        waitSeconds: { type: 'number', minimum: 0, maximum: maxWaitSeconds, description: 'Only with `next`: how long that pull waits for an item (a long poll, as `next`).' },
      },
    },
    {
      type: 'object',
      required: ['outcome', 'repeated'],
      properties: {
        outcome: ref('ContextualOutcome'),
        repeated: { type: 'boolean' },
        paramsDiffer: { type: 'boolean', enum: [true], description: 'Only on a repeat whose params differ from those the outcome was committed with: yours were not applied.' },
        message: { type: 'string', description: 'With `paramsDiffer`: says so in a sentence.' },
        acked: { type: 'boolean', description: 'Only when `ack` was asked: the work item is settled now (by this call, or by the earlier one a repeat resolves); false when its lease is no longer held (ack is then refused too).' },
        next: {
          type: 'object',
          description: 'Only when `next` was asked and the pull succeeded: what `next` answers.',
          required: ['consumerId', 'item'],
          properties: { consumerId: { type: 'string' }, item: { oneOf: [ref('ContextualWorkItem'), { type: 'null' }] } },
        },
        nextError: {
          type: 'object',
          description: 'Only when `next` was asked and the pull after the reaction failed: its error (the reaction stands; pull again with `next`).',
          required: ['code', 'message'],
          properties: { code: { type: 'string' }, message: { type: 'string' } },
        },
      },
    },
    { '403': error('`reaction_denied`: one answer for every reason (token, lease or less than 1 s left on it, access, source row).'), '422': error('`invalid_params`: the parameters do not fit the reaction\'s schema.') },
  ),
  '/api/contextual/consumers': op(
    'The consumers of one subscription with their status (its status page).',
    'The caller\'s own consumers; every consumer (at most 100) for an Admin (ManageAccess) of the subscription node, with `canRedrive` true.',
    { type: 'object', additionalProperties: false, required: ['subscription'], properties: { subscription: { type: 'string' } } },
    {
      type: 'object',
      required: ['subscription', 'canRedrive', 'consumers', 'definitionHash', 'stale'],
      properties: {
        subscription: { type: 'string' },
        definitionHash: { type: 'string', description: 'The hash of the definition the subscription holds now.' },
        stale: {
          type: 'object',
          description: 'What the listed consumers of earlier definitions (current: false) hold: the app warns with it before a definition is changed (after the save, every current consumer becomes stale).',
          properties: { consumers: { type: 'integer' }, pending: { type: 'integer' }, leased: { type: 'integer' }, dead: { type: 'integer' } },
        },
        canRedrive: { type: 'boolean' },
        consumers: { type: 'array', items: { allOf: [ref('ContextualStatus'), { type: 'object', properties: { owner: { type: 'string', description: 'The worker account\'s user id.' }, ownerName: { type: ['string', 'null'], description: 'Its display name.' } } }] } },
      },
    },
  ),
  '/api/contextual/wakeups': {
    get: {
      summary: 'Payload-free wake-ups for one of your consumers (server-sent events).',
      description:
        'A `text/event-stream` of `event: wake` with empty data: one at once (so a reconnect re-asks durable truth), then at most one per 200 ms when a commit of the consumer\'s events that you may read lands, or when a nack or re-drive makes its work due. It carries nothing of the commit; call `next`. There is no database-wide stream. At most 16 streams per user (429 `rate_limited`).',
      security: bearer,
      parameters: [{ name: 'consumerId', in: 'query', required: true, schema: { type: 'string' } }],
      responses: { '200': { description: 'The stream', content: { 'text/event-stream': { schema: { type: 'string' } } } }, ...c4xx, '429': error('`rate_limited`: too many open streams.') },
    },
  },
} as const
