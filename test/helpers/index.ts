/**
 * Test helpers for integration tests and benchmarks: real servers on port 0, real clients.
 *
 * - `startTestServer` / `spawnServer`: in-process or child-process sync server, temp data dir.
 * - `api`, `signup`, `login`: the HTTP API, without throwing on statuses.
 * - `createSpace`, `grantRole`, `createGroup`, `addMember`: access set-up that must succeed.
 * - `stockProvider`: an unmodified y-websocket provider on `/sync/{path}`.
 * - `MuxClient`: a minimal `/mux` client (shared/protocol.ts).
 * - `openRawSocket`: a bare socket for malformed input.
 * - `waitFor`: wait for a condition, never for a duration.
 */
export * from './wait-for.js'
export * from './api.js'
export * from './mesh.js'
export * from './stock-provider.js'
export * from './mux-client.js'
export * from './raw-socket.js'
export * from './spawn-server.js'
export * from './test-server.js'
export * from './crafted-updates.js'
export * from './cluster.js'
export * from './openai-server.js'
