export { SearchService, searchText, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, type SearchResult } from './search-service.js'
export { searchRoutes } from './search-route.js'
