export { SocketServer, type SocketServerOptions, type SocketSession } from './socket-server.js'
export { MuxSession, type MuxSessionOptions } from './mux-session.js'
export { SyncSession, closeOnError, type SyncSessionOptions } from './sync-session.js'
export type { SessionSocket } from './socket-guards.js'
