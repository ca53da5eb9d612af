export { apiRoutes, type ApiDeps } from './api-routes.js'
export { absentNode, moveRoutes } from './move-routes.js'
export { bearerToken, createHttpHandler, type HttpHandlerOptions } from './http-server.js'
export type { Route, RouteRequest, RouteResult } from './route.js'
