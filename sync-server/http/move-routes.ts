import { WeftError, isJsonObject, must, parseNodePath, type NodePath, type Principal } from '../../shared/index.js'
import { MoveService } from '../nodes/move-service.js'
import type { NodeService } from '../nodes/node-service.js'
import type { Route, RouteRequest } from './route.js'

function caller(r: RouteRequest): Principal {
  return must(r.principal, 'route requires auth')
}

/** [MOVE1] [MOVE5] [MOVE6] Move, trash, restore and the trash listing. */
export function moveRoutes(nodes: NodeService): Route[] {
  const moves = new MoveService(nodes)
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
export async function absentNode(nodes: NodeService, principal: Principal, path: NodePath): Promise<WeftError> {
  const to = await nodes.movedTo(path)
  if (to && nodes.permissions(principal, to).has('Read')) return new WeftError('moved', `${path} was moved to ${to}.`, { to })
  return new WeftError('not_found', `No node at ${path}.`)
}
