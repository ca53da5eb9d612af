import { WeftError, parseNodePath, type NodePath, type Principal } from '../../../shared/index.js'
import type { Route, RouteRequest } from '../../http/index.js'
import {
  GroupInviteBody,
  SpaceInviteBody,
  inviteToGroup,
  inviteToSpace,
  listSpaceMembers,
  revokeSpaceInvite,
  type InviteDeps,
} from './invites.js'

/**
 * HTTP surface of invites. A space is a top-level segment; a group path may contain `/`, so the
 * group routes capture the rest of the path. The HTTP layer has already decoded each segment
 * (and refuses an encoded `/` inside one).
 */
function pathParam(raw: string | undefined, what: string): NodePath {
  if (raw === undefined) throw new WeftError('invalid_request', `Missing ${what}.`)
  return parseNodePath(raw)
}

function caller(r: RouteRequest): Principal {
  if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
  return r.principal
}

function parseBody<T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } }, body: unknown): T {
  const r = schema.safeParse(body)
  if (!r.success) {
    const issue = r.error.issues[0]
    throw new WeftError('invalid_request', `Invalid ${issue?.path.map(String).join('.') || 'body'}: ${issue?.message ?? 'invalid'}.`)
  }
  return r.data
}

export function inviteRoutes(deps: InviteDeps): Route[] {
  return [
    {
      method: 'POST',
      pattern: /^\/api\/spaces\/(?<space>[^/]+)\/invites\/?$/,
      async handler(r) {
        const space = pathParam(r.params.space, 'space')
        const body = parseBody(SpaceInviteBody, await r.json())
        const outcome = await inviteToSpace(deps, caller(r), space, body)
        return { status: outcome.status === 'Granted' ? 200 : 201, body: outcome }
      },
    },
    {
      method: 'GET',
      pattern: /^\/api\/spaces\/(?<space>[^/]+)\/members\/?$/,
      async handler(r) {
        return { status: 200, body: await listSpaceMembers(deps, caller(r), pathParam(r.params.space, 'space')) }
      },
    },
    {
      method: 'DELETE',
      pattern: /^\/api\/spaces\/(?<space>[^/]+)\/invites\/(?<id>[^/]+)\/?$/,
      async handler(r) {
        const space = pathParam(r.params.space, 'space')
        const id = r.params.id ?? ''
        return { status: 200, body: await revokeSpaceInvite(deps, caller(r), space, id) }
      },
    },
    {
      method: 'POST',
      pattern: /^\/api\/groups\/(?<group>.+)\/invites\/?$/,
      async handler(r) {
        const group = pathParam(r.params.group, 'group')
        const body = parseBody(GroupInviteBody, await r.json())
        const results = await inviteToGroup(deps, caller(r), group, body)
        return { status: 200, body: { results } }
      },
    },
  ]
}
