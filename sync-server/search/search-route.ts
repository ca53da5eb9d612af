import { WeftError, must } from '../../shared/index.js'
import type { Route } from '../http/index.js'
import { SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, type SearchService } from './search-service.js'

/** [FIND2] [FIND3] `GET /api/search?q=&limit=`: quick find over the nodes the caller may read. */
export function searchRoutes(search: SearchService): Route[] {
  return [
    {
      method: 'GET',
      pattern: /^\/api\/search$/,
      handler: async (r) => {
        const q = r.query.get('q') ?? ''
        const rawLimit = r.query.get('limit')
        let limit = SEARCH_DEFAULT_LIMIT
        if (rawLimit !== null && rawLimit !== '') {
          limit = Number(rawLimit)
          if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) {
            throw new WeftError('invalid_request', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}.`)
          }
        }
        const items = await search.search(must(r.principal, 'route requires auth'), q, limit)
        return { status: 200, body: { items } }
      },
    },
  ]
}
