import {
  PROTOCOL_VERSION,
  PutNodeBody,
  WeftError,
  assertMergePatch,
  isWeftError,
  must,
  parseNodePath,
  type NodePath,
  type NodeQuery,
  type Principal,
} from '../../shared/index.js'
import { DEFAULT_LOGIN_LIMITS, parse, type AuthService } from '../auth/index.js'
import { MAX_CURSOR_LENGTH, isSealedCursor, type HttpNodeApi } from '../nodes/index.js'
import { ClientAddresses } from './client-address.js'
import { bearerToken } from './http-server.js'
import { OPENAPI_DOCUMENT } from './openapi.js'
import { absentNode } from './move-routes.js'
import type { Route, RouteRequest } from './route.js'

export interface ApiDeps {
  nodes: HttpNodeApi
  auth: AuthService
  isHealthy(): boolean
  /** The limits `GET /api/config` tells clients; absent fields fall back to the defaults. */
  config?: { maxPayloadBytes: number; maxJsonDepth?: number; loginFreeFailuresPerAccount?: number; loginFreeFailuresPerAddress?: number; loginLockoutBaseMs?: number; loginLockoutMaxMs?: number; trustedProxies?: string[] }
  /** [ACT18] The engines' limits (a run's memory, time, log, Mesh calls, runs per user), by setting name. */
  engineLimits?: () => Record<string, number>
  /** [OPS10] Whether the caller sees the operator's page (`GET /api/me` says so, for the app's navigation). */
  isOperator?: (principal: Principal) => Promise<boolean>
}

/** DESIGN.md: JSON nested deeper than MAX_JSON_DEPTH (default 64) is refused. */
const DEFAULT_MAX_JSON_DEPTH = 64
const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

const NODE = /^\/api\/nodes\/(?<path>.+)$/

function caller(r: RouteRequest): Principal {
  return must(r.principal, 'route requires auth')
}

function nodePath(r: RouteRequest): NodePath {
  return parseNodePath(r.params.path)
}

/**
 * [CREATE1] `If-None-Match: *` makes a PUT create-only (RFC 9110 13.1.2). Entity tags are not
 * supported, so any other value is refused rather than ignored: ignoring it would turn a
 * conditional request into an unconditional replace.
 */
function createOnly(r: RouteRequest): boolean {
  const raw = r.req.headers['if-none-match']
  if (raw === undefined) return false
  const value = (Array.isArray(raw) ? raw.join(',') : raw).trim()
  if (value === '*') return true
  throw new WeftError('invalid_request', 'If-None-Match supports only "*" (create only if absent); nodes carry no entity tags.')
}

function positiveInt(r: RouteRequest, name: string, fallback: number): number {
  const raw = r.query.get(name)
  if (raw === null || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new WeftError('invalid_request', `${name} must be a positive integer.`)
  // Past any page a route serves (each caps its own): no database is handed a number past its integers.
  return Math.min(n, Number.MAX_SAFE_INTEGER)
}

/** The HTTP API of DESIGN.md's contract table. */
export function apiRoutes(deps: ApiDeps): Route[] {
  const { nodes, auth } = deps
  const addresses = ClientAddresses.parse(deps.config?.trustedProxies?.join(','))
  return [
    {
      method: 'GET',
      pattern: /^\/healthz$/,
      auth: false,
      handler: async () => {
        if (!deps.isHealthy()) throw new WeftError('unavailable', 'Starting: storage or engines are not ready yet.')
        return { status: 200, body: { ok: true } }
      },
    },
    {
      method: 'POST',
      pattern: /^\/api\/auth\/signup$/,
      auth: false,
      handler: async (r) => ({ status: 201, body: await auth.signup(await r.json()) }),
    },
    {
      method: 'POST',
      pattern: /^\/api\/auth\/login$/,
      auth: false,
      // [AUTH3] Throttled per account and per client address ([AUTH5]: the client's, behind a trusted proxy).
      handler: async (r) => ({ status: 200, body: await auth.login(await r.json(), addresses.of(r.req)) }),
    },
    {
      method: 'POST',
      pattern: /^\/api\/auth\/logout$/,
      handler: async (r) => {
        await auth.logout(must(bearerToken(r.req)))
        return { status: 204 }
      },
    },
    {
      method: 'GET',
      pattern: /^\/api\/me$/,
      handler: async (r) => {
        const p = caller(r)
        if (p.kind !== 'user') throw new WeftError('forbidden', 'Only users have a profile.')
        const node = await nodes.get(p, p.userId as string as NodePath)
        const content = node?.content ?? {}
        return {
          status: 200,
          body: {
            userId: p.userId,
            email: content.Email ?? null,
            name: content.FullName ?? node?.name ?? p.userId,
            pinnedPaths: Array.isArray(content.PinnedPaths) ? content.PinnedPaths : [],
            operator: (await deps.isOperator?.(p)) ?? false,
          },
        }
      },
    },
    {
      // [WEB15] What the caller may do on a node, from the checks writes make: the app offers
      // nothing the server would refuse.
      method: 'GET',
      pattern: /^\/api\/permissions\/(?<path>.+)$/,
      handler: async (r) => {
        const path = nodePath(r)
        const node = await nodes.get(caller(r), path)
        if (!node) throw new WeftError('not_found', `No node at ${path}.`)
        return { status: 200, body: { path, nodeType: node.nodeType, ...nodes.capabilities(caller(r), node) } }
      },
    },
    {
      method: 'GET',
      pattern: /^\/api\/nodes$/,
      handler: async (r) => {
        const query: NodeQuery = {}
        const parent = r.query.get('parent')
        if (parent !== null) query.parent = parent === '' ? ('' as NodePath) : parseNodePath(parent)
        const nodeType = r.query.get('nodeType')
        if (nodeType) query.nodeType = nodeType
        const limit = r.query.get('limit')
        if (limit !== null) {
          const n = Number(limit)
          if (!Number.isInteger(n) || n < 1) throw new WeftError('invalid_request', 'limit must be a positive integer.')
          query.limit = n
        }
        // [FEED3] The cursor of the previous page: only paths after it, or a sealed position ([QUERY1]).
        const after = r.query.get('after')
        if (after !== null && after !== '') {
          if (isSealedCursor(after) && after.length <= MAX_CURSOR_LENGTH) query.after = after
          else query.after = parseNodePath(after)
        }
        const where: Record<string, string> = {}
        for (const [k, v] of r.query) if (k.startsWith('where.')) where[k.slice('where.'.length)] = v
        if (Object.keys(where).length) query.where = where
        const page = await nodes.queryPage(caller(r), query)
        return { status: 200, body: page.next === null ? { items: page.items } : { items: page.items, next: page.next } }
      },
    },
    {
      method: 'GET',
      pattern: NODE,
      handler: async (r) => {
        const path = nodePath(r)
        const node = await nodes.get(caller(r), path)
        if (!node) throw await absentNode(nodes, caller(r), path)
        return { status: 200, body: node }
      },
    },
    {
      method: 'PUT',
      pattern: NODE,
      handler: async (r) => {
        const path = nodePath(r)
        const only = createOnly(r)
        const body = parse(PutNodeBody, await r.json())
        const draft = { nodeType: body.nodeType, name: body.name, content: body.content as never }
        if (only) {
          try {
            return { status: 201, body: await nodes.create(caller(r), path, draft, 'http') }
          } catch (err) {
            // Whether a node exists is itself readable information: as for a plain PUT.
            if (isWeftError(err) && err.code === 'already_exists' && !nodes.permissions(caller(r), path).has('Read')) {
              throw new WeftError('forbidden', `You cannot read ${path}, so you cannot create or replace it.`)
            }
            throw err
          }
        }
        const { node, created } = await nodes.put(caller(r), path, draft, 'http')
        return { status: created ? 201 : 200, body: node }
      },
    },
    {
      method: 'PATCH',
      pattern: NODE,
      handler: async (r) => {
        const path = nodePath(r)
        const type = (r.req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
        if (type !== 'application/merge-patch+json' && type !== 'application/json') {
          throw new WeftError('unsupported_media_type', 'Send the patch as Content-Type: application/merge-patch+json (RFC 7396).')
        }
        const patch = await r.json()
        // [STO10] Its text is checked against the stored content by the write path.
        assertMergePatch(patch, DEFAULT_MAX_JSON_DEPTH, false)
        return { status: 200, body: await nodes.patch(caller(r), path, patch, 'http') }
      },
    },
    {
      method: 'DELETE',
      pattern: NODE,
      handler: async (r) => {
        await nodes.delete(caller(r), nodePath(r), 'http')
        return { status: 204 }
      },
    },
    {
      method: 'GET',
      pattern: /^\/api\/changes$/,
      handler: async (r) => {
        const since = Number(r.query.get('since') ?? 0)
        // A version is a safe integer: one past it (1e20) reached PostgreSQL as a bigint it cannot hold (a 500).
        if (!Number.isSafeInteger(since) || since < 0) throw new WeftError('invalid_request', 'since must be a non-negative integer version.')
        const limit = positiveInt(r, 'limit', 1000)
        // [FEED1] `next` always: the version to continue from, past everything examined.
        return { status: 200, body: await nodes.changesPage(caller(r), since, limit) }
      },
    },
    {
      method: 'GET',
      pattern: /^\/api\/config$/,
      auth: false,
      // What a client must know before it edits: it refuses an oversized edit locally.
      handler: async () => ({
        status: 200,
        body: {
          maxPayloadBytes: deps.config?.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
          maxJsonDepth: deps.config?.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH,
          protocolVersion: PROTOCOL_VERSION,
          // [AUTH3] How failed logins are throttled.
          login: {
            freeFailuresPerAccount: deps.config?.loginFreeFailuresPerAccount ?? DEFAULT_LOGIN_LIMITS.freePerAccount,
            freeFailuresPerAddress: deps.config?.loginFreeFailuresPerAddress ?? DEFAULT_LOGIN_LIMITS.freePerAddress,
            lockoutBaseMs: deps.config?.loginLockoutBaseMs ?? DEFAULT_LOGIN_LIMITS.lockoutBaseMs,
            lockoutMaxMs: deps.config?.loginLockoutMaxMs ?? DEFAULT_LOGIN_LIMITS.lockoutMaxMs,
          },
          limits: deps.engineLimits?.() ?? {},
        },
      }),
    },
    {
      method: 'GET',
      pattern: /^\/api\/openapi\.json$/,
      auth: false,
      handler: async () => ({ status: 200, body: OPENAPI_DOCUMENT }),
    },
  ]
}
