import { WeftError, isJsonObject, must, parseNodePath, type NodePath, type Principal } from '../../shared/index.js'
import type { HttpNodeApi, MoveService } from '../nodes/index.js'
import type { Route, RouteRequest } from './route.js'

function caller(r: RouteRequest): Principal {
  return must(r.principal, 'route requires auth')
}

/** The longest name a rename takes (a PUT's `name` takes 500). */
const MAX_NAME_LENGTH = 500

/** [MOVE1] [MOVE5] [MOVE6] [MOVE8] Rename, move, trash, restore and the trash listing. */
export function moveRoutes(nodes: HttpNodeApi, moves: MoveService): Route[] {
  return [
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/move$/,
      handler: async (r) => {
        const body = await r.json()
        if (!isJsonObject(body) || typeof body.to !== 'string') throw new WeftError('invalid_request', 'Send { "to": "<the new path>" }.')
        return { status: 200, body: await moves.move(caller(r), parseNodePath(r.params.path), parseNodePath(body.to)) }
      },
    },
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/rename$/,
      handler: async (r) => {
        const body = await r.json()
        const name = isJsonObject(body) && typeof body.name === 'string' ? body.name.trim() : ''
        // eslint-disable-next-line no-control-regex
        if (!name || name.length > MAX_NAME_LENGTH || /[\u0000-\u001f\u007f]/.test(name)) {
          throw new WeftError('invalid_request', `Send { "name": "…" }: 1 to ${MAX_NAME_LENGTH} characters, any language, no control characters.`)
        }
        return { status: 200, body: await nodes.rename(caller(r), parseNodePath(r.params.path), name) }
      },
    },
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/trash$/,
      handler: async (r) => ({ status: 200, body: await moves.trash(caller(r), parseNodePath(r.params.path)) }),
    },
    {
      method: 'POST',
      pattern: /^\/api\/nodes\/(?<path>.+)\/restore$/,
      handler: async (r) => ({ status: 200, body: await moves.restore(caller(r), parseNodePath(r.params.path)) }),
    },
    {
      method: 'GET',
      pattern: /^\/api\/trash\/(?<top>[^/]+)$/,
      handler: async (r) => ({ status: 200, body: { items: await moves.listTrash(caller(r), parseNodePath(r.params.top)) } }),
    },
  ]
}

/**
 * [MOVE3] The refusal for a read of an absent node: `moved` with the new place when the node was
 * moved and the caller may read it there, else `not_found`.
 */
export async function absentNode(nodes: HttpNodeApi, principal: Principal, path: NodePath): Promise<WeftError> {
  const to = await nodes.movedTo(path)
  if (to && nodes.permissions(principal, to).has('Read')) return new WeftError('moved', `${path} was moved to ${to}.`, { to })
  return new WeftError('not_found', `No node at ${path}.`)
}
