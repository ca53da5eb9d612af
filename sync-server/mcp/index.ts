// mcp-server.ts (the MCP SDK) loads on the first /mcp request or loadMcpServer(), never at
// import: only its types are re-exported here.
export { loadMcpServer, mcpRoutes } from './http-route.js'
export type { McpPeers, McpServerDeps } from './mcp-server.js'
export { TOOLS, TOOL_NAMES, type McpDeps, type WeftTool } from './tools.js'
