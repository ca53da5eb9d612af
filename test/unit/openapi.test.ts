import { describe, expect, it } from 'vitest'
import { apiRoutes, type ApiDeps } from '../../sync-server/http/api-routes.js'
import { OPENAPI_DOCUMENT } from '../../sync-server/http/openapi.js'
import { inviteRoutes } from '../../sync-server/engines/subscriptions/routes.js'
import { moveRoutes } from '../../sync-server/http/move-routes.js'
import type { HttpNodeApi, MoveService } from '../../sync-server/nodes/index.js'
import type { InviteDeps } from '../../sync-server/engines/subscriptions/invites.js'
import { threadRoutes } from '../../sync-server/engines/threads/post.js'
import { systemClock } from '../../sync-server/engines/threads/model.js'
import type { NodeApi } from '../../sync-server/nodes/types.js'
import { searchRoutes, type SearchService } from '../../sync-server/search/index.js'
import { contextualRoutes, type ContextualService } from '../../sync-server/contextual/index.js'
import { mcpRoutes, type McpServerDeps } from '../../sync-server/mcp/index.js'
import { adminOverviewRoute } from '../../sync-server/metrics/index.js'

/** [DOCS1] The OpenAPI document describes every route the server has. */
describe('OpenAPI document', () => {
  // Building the route tables touches none of their dependencies.
  const routes = [...apiRoutes({ isHealthy: () => true } as unknown as ApiDeps), ...inviteRoutes({} as unknown as InviteDeps), ...threadRoutes({} as unknown as NodeApi, systemClock), ...searchRoutes({} as unknown as SearchService), ...moveRoutes({} as unknown as HttpNodeApi, {} as unknown as MoveService), ...contextualRoutes({} as unknown as ContextualService), ...mcpRoutes({} as unknown as McpServerDeps), adminOverviewRoute({} as unknown as Parameters<typeof adminOverviewRoute>[0])]
  const paths = OPENAPI_DOCUMENT.paths as Record<string, Record<string, unknown>>
  /** A concrete URL for an OpenAPI path template: every `{param}` becomes a valid segment. */
  const example = (template: string) => template.replace(/\{[^}]+\}/g, 'Seg1')

  it('[DOCS1] every route in api-routes (and the invite, thread, search and move routes) is described with its method', () => {
    const missing = routes
      .filter((route) => !Object.entries(paths).some(([template, ops]) => route.pattern.test(example(template)) && route.method.toLowerCase() in ops))
      .map((r) => `${r.method} ${r.pattern.source}`)
    expect(missing).toEqual([])
  })

  it('[DOCS1] every described path and method exists (nothing documented that the server lacks, but the activities run route)', () => {
    const extra: string[] = []
    for (const [template, ops] of Object.entries(paths)) {
      for (const method of Object.keys(ops).filter((k) => k !== 'parameters')) {
        if (!routes.some((r) => r.method.toLowerCase() === method && r.pattern.test(example(template)))) extra.push(`${method} ${template}`)
      }
    }
    // POST /api/nodes/{path}/run belongs to the activities engine (DESIGN.md "Activities").
    expect(extra.filter((e) => e !== 'post /api/nodes/{path}/run')).toEqual([])
  })

  it('[DOCS1] is OpenAPI 3.1 and every $ref resolves', () => {
    expect(OPENAPI_DOCUMENT.openapi).toBe('3.1.0')
    const refs = JSON.stringify(OPENAPI_DOCUMENT).match(/"#\/components\/schemas\/[A-Za-z]+"/g) ?? []
    const schemas = OPENAPI_DOCUMENT.components.schemas as Record<string, unknown>
    for (const r of refs) expect(schemas, r).toHaveProperty(JSON.parse(r).slice('#/components/schemas/'.length))
  })
})
