export { mcpRoutes } from './http-route.js'
export { buildMcpServer, toolError, type McpServerDeps } from './mcp-server.js'
export { TOOLS, TOOL_NAMES, type McpDeps, type WeftTool } from './tools.js'
