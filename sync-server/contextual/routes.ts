import { WeftError } from '../../shared/index.js'
import type { Route } from '../http/index.js'
import type { ContextualService } from './contextual-service.js'

const OPERATIONS = ['next', 'ack', 'nack', 'extend', 'status', 'react', 'redrive'] as const
type Operation = (typeof OPERATIONS)[number]

const isOperation = (op: string): op is Operation => (OPERATIONS as readonly string[]).includes(op)

/** [CTX30] `POST /api/contextual/{operation}`: JSON in, JSON out, the service's function per operation. */
export function contextualRoutes(service: ContextualService): Route[] {
  return [
    {
      method: 'POST',
      pattern: /^\/api\/contextual\/(?<op>[a-z]+)$/,
      async handler(r) {
        if (!r.principal) throw new WeftError('unauthorized', 'Sign in first.')
        const op = r.params.op ?? ''
        if (!isOperation(op)) {
          throw new WeftError('not_found', `No contextual operation ${JSON.stringify(op)}: use next, ack, nack, extend, status, react or redrive.`)
        }
        return { status: 200, body: await service[op](r.principal, await r.json()) }
      },
    },
  ]
}
