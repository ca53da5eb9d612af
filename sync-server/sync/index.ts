export { SocketServer, type SocketServerOptions, type SocketSession } from './socket-server.js'
