/**
 * The OpenAPI 3.1 description of the HTTP API, served at `GET /api/openapi.json`. A static
 * object, not generated: it is the contract (docs/API.md says the same in prose), and
 * `test/unit/openapi.test.ts` fails when a route exists that it does not describe.
 */

import { CONTEXTUAL_PATHS, CONTEXTUAL_SCHEMAS } from './openapi-contextual.js'
import { MCP_PATHS } from './openapi-mcp.js'

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: unknown) => ({ 'application/json': { schema } })
const error = (description: string) => ({ description, content: json(ref('Error')) })
const bearer = [{ bearer: [] }]

const pathParam = {
  name: 'path',
  in: 'path',
  required: true,
  description: 'The node path: `/`-separated segments of `[A-Za-z0-9_.@-]`, each URL-encoded.',
  schema: { type: 'string' },
} as const

const spaceParam = { name: 'space', in: 'path', required: true, description: 'A top-level Space path.', schema: { type: 'string' } } as const

const common = {
  '400': error('Bad input (`invalid_request`, `invalid_path`, `invalid_json`, ...); nothing changed.'),
  '401': error('No valid bearer token (`unauthorized`).'),
  '403': error('The caller lacks the permission (`forbidden`, `forbidden_field`).'),
} as const

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'Weft sync server',
    version: '1',
    description:
      'A local-first mesh of JSON nodes. Every node lives at a path, has a type, and its content is a Yjs document. ' +
      'Errors are `{ error: { code, message } }` with a stable `code`; client input never gets a 500. ' +
      'Node contents also sync over WebSocket: `/sync/{path}?token=` (stock y-websocket) and `/mux?token=` (many nodes on one socket). ' +
      'On HTTP the token goes in the `Authorization: Bearer` header only; `?token=` is read on WebSocket upgrades only. See docs/API.md.',
  },
  servers: [{ url: '/' }],
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'The token from signup or login, in the Authorization header (never in the URL).' } },
    schemas: {
      ...CONTEXTUAL_SCHEMAS,
      Error: {
        type: 'object',
        required: ['error'],
        properties: {
          error: {
            type: 'object',
            required: ['code', 'message'],
            properties: {
              code: { type: 'string', description: 'Stable: clients branch on it (e.g. `not_found`, `already_exists`, `payload_too_large`).' },
              message: { type: 'string', description: 'A sentence a person can act on.' },
            },
          },
        },
      },
      TrashMove: {
        type: 'object',
        required: ['trashPath', 'originalPath'],
        properties: { trashPath: { type: 'string', description: '`{space}/_Trash/{id}`: where the entry waits.' }, originalPath: { type: 'string' } },
      },
      TrashEntry: {
        type: 'object',
        required: ['path', 'originalPath', 'name', 'nodeType', 'deletedBy', 'deletedAt'],
        properties: {
          path: { type: 'string' },
          originalPath: { type: 'string' },
          name: { type: 'string' },
          nodeType: { type: 'string' },
          deletedBy: { type: 'string' },
          deletedByName: { type: ['string', 'null'], description: 'The display name of who deleted it.' },
          deletedAt: { type: 'string', format: 'date-time' },
        },
      },
      MeshNode: {
        type: 'object',
        required: ['path', 'nodeType', 'name', 'content', 'createdBy', 'createdAt', 'updatedAt', 'version', 'state'],
        properties: {
          path: { type: 'string' },
          nodeType: { type: 'string', description: 'User, Space, Group, Membership, AccessAssignment, Document, Invitation, EventSubscription, ActivityLog, Code, Thread, ...' },
          name: { type: 'string' },
          content: { type: 'object', additionalProperties: true },
          createdBy: { type: 'string' },
          createdAt: { type: 'string', format: 'date-time' },
          updatedAt: { type: 'string', format: 'date-time' },
          version: { type: 'integer', description: "The server's commit sequence of the node's last change (monotonic across the mesh)." },
          state: { type: 'string' },
        },
      },
      NodeDraft: {
        type: 'object',
        required: ['nodeType'],
        properties: {
          nodeType: { type: 'string', minLength: 1, maxLength: 100 },
          name: { type: 'string', maxLength: 500 },
          content: { type: 'object', additionalProperties: true, default: {} },
        },
      },
      ChangeRecord: {
        type: 'object',
        required: ['version', 'path', 'nodeType', 'kind'],
        properties: {
          version: { type: 'integer' },
          path: { type: 'string' },
          nodeType: { type: 'string' },
          kind: { enum: ['Created', 'Updated', 'Deleted'] },
        },
      },
      Auth: {
        type: 'object',
        required: ['userId', 'token'],
        properties: { userId: { type: 'string' }, token: { type: 'string' } },
      },
      InviteOutcome: {
        type: 'object',
        required: ['email', 'status'],
        properties: {
          email: { type: 'string' },
          status: { enum: ['Granted', 'Invited'] },
          userId: { type: 'string' },
          subscriptionId: { type: 'string' },
        },
      },
    },
  },
  paths: {
    ...CONTEXTUAL_PATHS,
    ...MCP_PATHS,
    '/healthz': {
      get: {
        summary: 'Ready once storage is open and the engines have reconciled.',
        responses: { '200': { description: 'Ready.', content: json({ type: 'object', properties: { ok: { const: true } } }) }, '503': error('Starting (`unavailable`).') },
      },
    },
    '/api/admin/overview': {
      get: {
        summary: "[OPS10] The operator's overview: this instance's /metrics figures (same registry) and what to act on. Operators only: the Admins of the `Admin` partition and the accounts in OPERATOR_EMAILS.",
        security: bearer,
        responses: {
          '200': {
            description: 'Figures (totals since start; two readings give a rate), dead letters, lagging consumers and stuck runs (at most 50 each).',
            content: json({
              type: 'object',
              required: ['at', 'instance', 'figures', 'deadLetters', 'laggingConsumers', 'stuckRuns', 'stuckRunMs', 'engines'],
              properties: {
                at: { type: 'string', format: 'date-time' },
                instance: { type: 'string', description: 'INSTANCE_ID of the instance that answered.' },
                figures: {
                  type: 'object',
                  properties: {
                    connections: { type: 'integer' },
                    rooms: { type: 'integer' },
                    loadedDocs: { type: 'integer' },
                    updates: { type: 'integer', description: 'weft_updates_total, every transport.' },
                    acks: { type: 'integer', description: 'weft_acks_total, every transport.' },
                    commits: { type: 'object', properties: { count: { type: 'integer' }, meanSeconds: { type: 'number' }, p99Seconds: { type: ['number', 'null'], description: 'Upper bound of the histogram bucket holding the 99th percentile.' } } },
                    refusals: { type: 'object', additionalProperties: { type: 'integer' }, description: 'weft_refusals_total by code, every transport.' },
                    engineLagVersions: { type: 'integer' },
                    engineLeaseHeld: { type: 'boolean', description: 'Whether this instance runs at least one engine partition.' },
                    enginePartitions: { type: 'array', items: { type: 'string' }, description: 'The engine partitions (engine names) this instance runs now; with several instances they are balanced between them.' },
                    contextual: { type: 'object', properties: { consumers: { type: 'integer' }, pending: { type: 'integer' }, leased: { type: 'integer' }, dead: { type: 'integer' }, maxLag: { type: 'integer' } } },
                    eventLoopDelaySeconds: { type: 'object', properties: { mean: { type: 'number' }, p99: { type: 'number' } } },
                  },
                },
                deadLetters: { type: 'array', items: { type: 'object', properties: { consumerId: { type: 'string' }, subscriptionPath: { type: 'string' }, name: { type: 'string' }, eventId: { type: 'string' }, path: { type: 'string' }, attempt: { type: 'integer' }, lastError: { type: ['string', 'null'] }, diedAt: { type: ['string', 'null'], format: 'date-time', description: 'When it died; null for one that died before the server kept the time.' } } } },
                laggingConsumers: { type: 'array', items: { type: 'object', properties: { consumerId: { type: 'string' }, subscriptionPath: { type: 'string' }, name: { type: 'string' }, cursor: { type: 'integer' }, lag: { type: 'integer', description: 'Changes since its last pull (most are usually not its events).' }, waiting: { type: 'integer', description: 'Its events waiting: pending, or leased past their lease. Only consumers with some are listed.' } } } },
                stuckRuns: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, category: { type: ['string', 'null'] }, codePath: { type: ['string', 'null'] }, startedBy: { type: ['string', 'null'] }, startedByName: { type: ['string', 'null'], description: 'The display name of who started it.' }, start: { type: 'string' }, runningMs: { type: 'integer' } } } },
                stuckRunMs: { type: 'integer', description: 'STUCK_RUN_MS: a run Running longer than this is listed.' },
                engines: {
                  type: 'array',
                  description: 'Each engine partition and the instance (INSTANCE_ID) running it now, across every instance; instance null while its lease is free.',
                  items: { type: 'object', required: ['partition', 'instance'], properties: { partition: { type: 'string' }, instance: { type: ['string', 'null'] } } },
                },
              },
            }),
          },
          '401': common['401'],
          '403': error('Not an operator (`forbidden`).'),
        },
      },
    },
    '/api/config': {
      get: {
        summary: "The server's limits, so a client can refuse an oversized edit before sending it.",
        responses: {
          '200': {
            description: 'Limits.',
            content: json({
              type: 'object',
              required: ['maxPayloadBytes', 'maxJsonDepth', 'protocolVersion'],
              properties: {
                maxPayloadBytes: { type: 'integer', description: 'Largest HTTP body or WebSocket frame (MAX_PAYLOAD_BYTES).' },
                maxJsonDepth: { type: 'integer', description: 'Deepest JSON nesting accepted (MAX_JSON_DEPTH, default 64).' },
                protocolVersion: { type: 'integer', description: 'The `/mux` wire protocol version.' },
                login: {
                  type: 'object',
                  description: 'How failed logins are throttled (LOGIN_* settings).',
                  properties: {
                    freeFailuresPerAccount: { type: 'integer' },
                    freeFailuresPerAddress: { type: 'integer' },
                    lockoutBaseMs: { type: 'integer' },
                    lockoutMaxMs: { type: 'integer' },
                  },
                },
                limits: {
                  type: 'object',
                  description: 'The bounds of a script run, by the setting that sets each (SCRIPT_MEMORY_MB, SCRIPT_LOG_MAX_LINES, SCRIPT_MESH_IN_FLIGHT, SCRIPT_MAX_RUNS_PER_USER, ...).',
                  additionalProperties: { type: 'integer' },
                },
              },
            }),
          },
        },
      },
    },
    '/api/openapi.json': {
      get: { summary: 'This document.', responses: { '200': { description: 'OpenAPI 3.1.', content: json({ type: 'object' }) } } },
    },
    '/api/auth/signup': {
      post: {
        summary: 'Create an account and its User node (which fires matching subscriptions, e.g. invites).',
        requestBody: {
          required: true,
          content: json({ type: 'object', required: ['email', 'password', 'name'], properties: { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } } }),
        },
        responses: { '201': { description: 'Signed up.', content: json(ref('Auth')) }, '400': common['400'], '409': error('`email_taken`.') },
      },
    },
    '/api/auth/login': {
      post: {
        summary: 'Log in.',
        requestBody: { required: true, content: json({ type: 'object', required: ['email', 'password'], properties: { email: { type: 'string' }, password: { type: 'string' } } }) },
        responses: {
          '200': { description: 'Logged in.', content: json(ref('Auth')) },
          '400': common['400'],
          '401': error('`invalid_credentials`.'),
          '429': {
            description: '`rate_limited`: too many failed logins for this email or from this address; try again after `Retry-After` seconds.',
            headers: { 'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' } } },
            content: json(ref('Error')),
          },
        },
      },
    },
    '/api/auth/logout': {
      post: { summary: 'Revoke the bearer token.', security: bearer, responses: { '204': { description: 'Logged out.' }, '401': common['401'] } },
    },
    '/api/me': {
      get: {
        summary: "The caller's profile (from their User node).",
        security: bearer,
        responses: {
          '200': {
            description: 'Profile.',
            content: json({
              type: 'object',
              properties: {
                userId: { type: 'string' },
                email: { type: ['string', 'null'] },
                name: { type: 'string' },
                pinnedPaths: { type: 'array', items: { type: 'string' } },
                operator: { type: 'boolean', description: '[OPS10] Whether the caller sees the operator\'s page (`GET /api/admin/overview`).' },
              },
            }),
          },
          '401': common['401'],
          '403': common['403'],
        },
      },
    },
    '/api/permissions/{path}': {
      get: {
        summary: 'What the caller may do on a node, decided by the same checks its writes meet (fields, delete, create).',
        security: bearer,
        parameters: [{ name: 'path', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': {
            description: 'Capabilities.',
            content: json({
              type: 'object',
              properties: {
                path: { type: 'string' },
                nodeType: { type: 'string' },
                permissions: { type: 'array', items: { type: 'string' } },
                fields: { type: 'object', additionalProperties: { type: 'boolean' } },
                newFields: { type: 'boolean' },
                canDelete: { type: 'boolean' },
                canCreate: { type: 'boolean' },
              },
            }),
          },
          '401': common['401'],
          '403': common['403'],
          '404': error('`not_found`.'),
        },
      },
    },
    '/api/nodes': {
      get: {
        summary: 'Query nodes the caller may read, ordered by path, paged by a cursor.',
        description:
          'Storage is filtered while paging: a page holds up to `limit` readable nodes. `next` is present when there may be more: ' +
          'pass it as `after` to continue. A page may hold fewer than `limit` items (even none) and still have a `next`: only a page without `next` is the end. ' +
          'Rows the caller cannot read are never examined: they never shorten a page or show in a cursor.',
        security: bearer,
        parameters: [
          { name: 'parent', in: 'query', description: "Children of this path; '' = the top level.", schema: { type: 'string' } },
          { name: 'nodeType', in: 'query', schema: { type: 'string' } },
          { name: 'limit', in: 'query', description: 'At most 1000 (default 100).', schema: { type: 'integer', minimum: 1 } },
          { name: 'after', in: 'query', description: 'The `next` of the previous page, unchanged (a path, or an opaque `_q.` cursor).', schema: { type: 'string' } },
          {
            name: 'where',
            in: 'query',
            style: 'deepObject',
            description: '`where.<Field>=<value>`: equality on top-level content fields, case-insensitive, compared as text.',
            schema: { type: 'object', additionalProperties: { type: 'string' } },
          },
        ],
        responses: {
          '200': {
            description: 'A page.',
            content: json({
              type: 'object',
              required: ['items'],
              properties: { items: { type: 'array', items: ref('MeshNode') }, next: { type: 'string', description: 'When there may be more: the last item\'s path, or an opaque cursor (`_q.`...) valid until the server restarts.' } },
            }),
          },
          ...common,
        },
      },
    },
    '/api/nodes/{path}': {
      parameters: [pathParam],
      get: {
        summary: 'Read a node.',
        security: bearer,
        responses: {
          '200': { description: 'The node.', content: json(ref('MeshNode')) },
          ...common,
          '404': error('`not_found`, or `moved` with `error.to`: the node was moved there ([MOVE3]; told only to a reader of the new place).'),
        },
      },
      put: {
        summary: 'Create or replace a node; with `If-None-Match: *` create only.',
        security: bearer,
        parameters: [
          {
            name: 'If-None-Match',
            in: 'header',
            description: '`*`: create only. When a node is at the path the answer is 412 `already_exists` and nothing changes. No other value is supported (400).',
            schema: { const: '*' },
          },
        ],
        requestBody: { required: true, content: json(ref('NodeDraft')) },
        responses: {
          '200': { description: 'Replaced.', content: json(ref('MeshNode')) },
          '201': { description: 'Created.', content: json(ref('MeshNode')) },
          ...common,
          '404': error('The parent does not exist (`not_found`).'),
          '409': error('`conflict` (e.g. a different nodeType, a parent being deleted) or `last_admin`.'),
          '412': error('`already_exists`: `If-None-Match: *` and a node is there; nothing changed.'),
          '413': error('`payload_too_large`.'),
          '422': error('`invalid_content`, `invalid_node_type`.'),
        },
      },
      patch: {
        summary: 'Apply an RFC 7396 merge patch to the content (one Yjs transaction).',
        security: bearer,
        requestBody: { required: true, content: { 'application/merge-patch+json': { schema: { type: 'object' } } } },
        responses: {
          '200': { description: 'The node after the patch.', content: json(ref('MeshNode')) },
          ...common,
          '404': error('`not_found`.'),
          '413': error('`payload_too_large`.'),
          '415': error('`unsupported_media_type`.'),
          '422': error('`invalid_content`.'),
        },
      },
      delete: {
        summary: 'Delete a node and its descendants.',
        security: bearer,
        responses: { '204': { description: 'Deleted.' }, ...common, '404': error('`not_found`.'), '409': error('`last_admin`.') },
      },
    },
    '/api/nodes/{path}/move': {
      parameters: [pathParam],
      post: {
        summary: 'Move the node with its subtree (children, access assignments, history) to `to`, in one transaction ([MOVE1]).',
        description:
          'Needs the right to delete the node where it is and to create it at `to`. The old path answers `moved` afterwards; clients with it open are closed with `moved`. ' +
          'Refused: `invalid_move` (into itself, a top-level node, the Admin partition, a reserved `_` place, a subtree holding a Group), `conflict` (something at `to`, or a run or thread still working inside).',
        security: bearer,
        requestBody: { required: true, content: json({ type: 'object', required: ['to'], properties: { to: { type: 'string', description: 'The new path.' } } }) },
        responses: {
          '200': { description: 'Moved.', content: json({ type: 'object', required: ['path', 'moved'], properties: { path: { type: 'string' }, moved: { type: 'integer', description: 'Nodes moved.' } } }) },
          ...common,
          '404': error('`not_found`: the node or the new parent does not exist.'),
          '409': error('`conflict` or `invalid_move`, with the reason.'),
        },
      },
    },
    '/api/nodes/{path}/rename': {
      parameters: [pathParam],
      post: {
        summary: 'Change the name people see ([MOVE8]); the path, and every link to it, stays. Needs Update.',
        security: bearer,
        requestBody: { required: true, content: json({ type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 500, description: 'Any Unicode text, no control characters.' } } }) },
        responses: { '200': { description: 'The renamed node.', content: json(ref('MeshNode')) }, ...common, '404': error('`not_found`.') },
      },
    },
    '/api/nodes/{path}/trash': {
      parameters: [pathParam],
      post: {
        summary: 'Move the node and its subtree to the trash of its space ([MOVE5]); it disappears from reads, queries and sync for everyone but the space\'s Admins.',
        security: bearer,
        responses: {
          '200': { description: 'Trashed.', content: json(ref('TrashMove')) },
          ...common,
          '404': error('`not_found`.'),
          '409': error('`invalid_move` (a top-level node, the Admin partition, a reserved place) or `conflict` (a run still working inside).'),
        },
      },
    },
    '/api/nodes/{path}/restore': {
      parameters: [pathParam],
      post: {
        summary: 'Put a trash entry (`{space}/_Trash/{id}`) back where it was ([MOVE6]); Admins of the space only.',
        security: bearer,
        responses: {
          '200': { description: 'Restored.', content: json({ type: 'object', required: ['path'], properties: { path: { type: 'string' } } }) },
          ...common,
          '404': error('`not_found`: no such trash entry.'),
          '409': error('`conflict`: the original place is taken or its parent is gone; the message says which.'),
        },
      },
    },
    '/api/trash/{space}': {
      parameters: [spaceParam],
      get: {
        summary: 'The trash of a space or home, newest first ([MOVE6]); Admins of it only. Purge an entry with `DELETE /api/nodes/{entry}`.',
        security: bearer,
        responses: {
          '200': { description: 'The entries.', content: json({ type: 'object', required: ['items'], properties: { items: { type: 'array', items: ref('TrashEntry') } } }) },
          ...common,
        },
      },
    },
    '/api/nodes/{path}/run': {
      parameters: [pathParam],
      post: {
        summary: 'Run a Code node as a new activity (needs Execute on it).',
        description:
          'Creates an ActivityLog with CreatedBy = the caller, Source and Language copied from the Code node, and (unless start is false) StartedBy = the caller: the run acts as StartedBy. ' +
          'It lands at the routed parent, which must be in the Code node\'s partition or the caller\'s home (403 `forbidden`), readable by the caller (403 `forbidden`) and existing (404 `not_found`); a refused run creates nothing.',
        security: bearer,
        requestBody: { content: json({ type: 'object', properties: { inputs: { type: 'object' }, start: { type: 'boolean', default: true } } }) },
        responses: { '201': { description: 'The activity.', content: json({ type: 'object', required: ['path'], properties: { path: { type: 'string' } } }) }, ...common, '404': error('`not_found`: no such Code node, or the routed parent does not exist.') },
      },
    },
    '/api/nodes/{path}/messages': {
      parameters: [pathParam],
      post: {
        summary: 'Post a user message to a Thread (needs the Thread permission on it).',
        description:
          'Creates the cell {path}/{id} (Role user, Author = the caller) as system and queues it for the next round. ' +
          'The same id twice adds one cell (idempotent); the same id by another author is 409 `conflict`. Without an id the server makes one.',
        security: bearer,
        requestBody: {
          required: true,
          content: json({ type: 'object', required: ['text'], properties: { id: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$' }, text: { type: 'string', maxLength: 100000 } } }),
        },
        responses: {
          '201': { description: 'The message cell.', content: json({ type: 'object', required: ['path'], properties: { path: { type: 'string' } } }) },
          ...common,
          '404': error('`not_found`: no readable node at the path.'),
          '409': error('`conflict`: the id is another author\'s message.'),
          '413': error('`payload_too_large`: more than 100,000 characters.'),
        },
      },
    },
    '/api/changes': {
      get: {
        summary: 'The change feed: changes after `since` the caller may read, in version order.',
        description:
          'Filtered while paging: a request examines at most 10,000 change records and returns up to `limit` readable ones. ' +
          '`next` is the last version examined, readable or not: continue with `since=next`. When `next` equals `since`, the caller is caught up.',
        security: bearer,
        parameters: [
          { name: 'since', in: 'query', description: 'A version (default 0).', schema: { type: 'integer', minimum: 0 } },
          { name: 'limit', in: 'query', description: 'At most 10,000 (default 1000).', schema: { type: 'integer', minimum: 1 } },
        ],
        responses: {
          '200': {
            description: 'A page.',
            content: json({
              type: 'object',
              required: ['items', 'next'],
              properties: { items: { type: 'array', items: ref('ChangeRecord') }, next: { type: 'integer', description: 'The version to continue from.' } },
            }),
          },
          '400': common['400'],
          '401': common['401'],
        },
      },
    },
    '/api/search': {
      get: {
        summary: 'Quick find: nodes whose name or text holds every word of `q`, among those the caller may read, best first.',
        description:
          'Ranked by the name (equal to `q`, starting with it, holding it), then text-only matches; ties by the shorter name, then the path. ' +
          'A word of 3 or more characters matches any part of a name or text in any script (SQLite) or the start of a word (PostgreSQL). ' +
          'Nodes the caller cannot read are never returned and never change the answer. Nodes under reserved `_` segments are not indexed. ' +
          'Search syntax characters (quotes, `*`, `NEAR(`, parentheses, `:`) are plain text.',
        security: bearer,
        parameters: [
          { name: 'q', in: 'query', required: true, description: '1 to 200 characters, at most 8 words (else 400 `invalid_request`).', schema: { type: 'string', minLength: 1, maxLength: 200 } },
          { name: 'limit', in: 'query', description: '1 to 50 (default 20).', schema: { type: 'integer', minimum: 1, maximum: 50 } },
        ],
        responses: {
          '200': {
            description: 'The best matches.',
            content: json({
              type: 'object',
              required: ['items'],
              properties: {
                items: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['path', 'name', 'nodeType', 'snippet', 'where'],
                    properties: {
                      path: { type: 'string' },
                      name: { type: 'string', description: 'The display name: the node name, else its last path segment.' },
                      nodeType: { type: 'string' },
                      snippet: { type: 'string', description: 'Up to 120 characters of the text around the first match.' },
                      where: { type: 'array', items: { type: 'string' }, description: 'The names of its ancestors the caller may read, the top first.' },
                    },
                  },
                },
              },
            }),
          },
          '400': common['400'],
          '401': common['401'],
        },
      },
    },
    '/api/spaces/{space}/invites': {
      parameters: [spaceParam],
      post: {
        summary: 'Invite by email: grant now when the person has an account, else when they sign up (Admins only).',
        security: bearer,
        requestBody: {
          required: true,
          content: json({
            type: 'object',
            required: ['email'],
            properties: { email: { type: 'string' }, role: { enum: ['Viewer', 'Commenter', 'Editor', 'Admin'], default: 'Editor' }, pin: { type: 'boolean', default: true } },
          }),
        },
        responses: {
          '200': { description: 'Granted at once.', content: json(ref('InviteOutcome')) },
          '201': { description: 'Invited: granted on sign-up.', content: json(ref('InviteOutcome')) },
          ...common,
          '404': error('`not_found`.'),
          '409': error('`conflict`: the person is explicitly Denied on the space, or the invite\'s id holds another invite.'),
        },
      },
    },
    '/api/spaces/{space}/members': {
      parameters: [spaceParam],
      get: {
        summary: "A space's members, roles and invites (any reader of the space).",
        security: bearer,
        responses: { '200': { description: 'Members and invites.', content: json({ type: 'object', properties: { members: { type: 'array' }, invites: { type: 'array' } } }) }, ...common, '404': error('`not_found`.') },
      },
    },
    '/api/spaces/{space}/invites/{id}': {
      parameters: [spaceParam, { name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      delete: {
        summary: 'Revoke a pending invite: it ends Cancelled and never grants (a grant already under way is taken back).',
        security: bearer,
        responses: {
          '200': { description: 'Cancelled.', content: json({ type: 'object', properties: { status: { const: 'Cancelled' } } }) },
          ...common,
          '404': error('`not_found`.'),
          '409': error('`conflict`: only a Pending invite can be revoked.'),
        },
      },
    },
    '/api/groups/{group}/invites': {
      parameters: [{ name: 'group', in: 'path', required: true, description: 'A Group path inside a space (may contain `/`).', schema: { type: 'string' } }],
      post: {
        summary: 'Invite one or many emails to a group (Admins only).',
        security: bearer,
        requestBody: {
          required: true,
          content: json({
            type: 'object',
            properties: { emails: { oneOf: [{ type: 'array', items: { type: 'string' } }, { type: 'string' }] }, email: { type: 'string' }, role: { enum: ['Viewer', 'Commenter', 'Editor', 'Admin', null] } },
          }),
        },
        responses: { '200': { description: 'One outcome per email.', content: json({ type: 'object', properties: { results: { type: 'array', items: ref('InviteOutcome') } } }) }, ...common, '404': error('`not_found`.') },
      },
    },
  },
} as const
