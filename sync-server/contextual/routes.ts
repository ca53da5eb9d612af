import { WeftError } from '../../shared/index.js'
import type { Route, RouteRequest } from '../http/index.js'
import type { ContextualService } from './contextual-service.js'

type Operation = 'next' | 'ack' | 'nack' | 'extend' | 'status' | 'react' | 'redrive'

/** [CTX30] `POST /api/contextual/{operation}`: JSON in, JSON out, the service's function per operation. */
export function contextualRoutes(service: ContextualService): Route[] {
  const ops: Record<Operation, (r: RouteRequest) => Promise<unknown>> = {
    next: async (r) => service.next(r.principal!, await r.json()),
    ack: async (r) => service.ack(r.principal!, await r.json()),
    nack: async (r) => service.nack(r.principal!, await r.json()),
    extend: async (r) => service.extend(r.principal!, await r.json()),
    status: async (r) => service.status(r.principal!, await r.json()),
    react: async (r) => service.react(r.principal!, await r.json()),
    redrive: async (r) => service.redrive(r.principal!, await r.json()),
  }
  return [
    {
      method: 'POST',
      pattern: /^\/api\/contextual\/(?<op>[a-z]+)$/,
      async handler(r) {
        if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
        const op = r.params.op ?? ''
        if (!Object.prototype.hasOwnProperty.call(ops, op)) {
          throw new WeftError('not_found', `No contextual operation ${JSON.stringify(op)}: use next, ack, nack, extend, status, react or redrive.`)
        }
        return { status: 200, body: await ops[op as Operation](r) }
      },
    },
  ]
}
