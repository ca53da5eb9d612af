/**
 * [MCP5] The MCP endpoint in the OpenAPI document (docs/API.md "MCP"): JSON-RPC 2.0 messages of
 * the Model Context Protocol over stateless Streamable HTTP. The tools and their arguments are
 * listed by the protocol itself (`tools/list`), not here.
 */
const json = (schema: unknown) => ({ 'application/json': { schema } })
const error = (description: string) => ({ description, content: json({ $ref: '#/components/schemas/Error' }) })
const notStateful = { description: 'Stateless: no session stream (`Allow: POST`).', content: json({ $ref: '#/components/schemas/Error' }) }

export const MCP_PATHS = {
  '/mcp': {
    post: {
      summary: 'MCP over Streamable HTTP, stateless: one JSON-RPC message (or batch) in, its answer out.',
      description:
        'Each request is answered by a server built for the caller alone; no `Mcp-Session-Id` is issued and no earlier `initialize` is needed, so any instance answers. Send `Accept: application/json, text/event-stream`. Tools: `weft_contextual_next`, `_ack`, `_nack`, `_extend`, `_status`, `_react`, `weft_get`, `weft_query`, `weft_patch`, `weft_run` (see `tools/list`). A refused tool call is a result with `isError: true` and `structuredContent: { error: { code, message } }`.',
      security: [{ bearer: [] }],
      requestBody: { required: true, content: json({ type: ['object', 'array'], description: 'A JSON-RPC 2.0 request or notification (or a batch).' }) },
      responses: {
        '200': { description: 'The JSON-RPC response(s).', content: json({ type: ['object', 'array'] }) },
        '202': { description: 'Notifications only: accepted, no body.' },
        '400': error('Not JSON (`invalid_json`), or not a JSON-RPC message.'),
        '401': error('No valid Bearer token (`unauthorized`).'),
        '406': { description: '`Accept` does not include both `application/json` and `text/event-stream`.' },
        '413': error('Over MAX_PAYLOAD_BYTES (`payload_too_large`).'),
      },
    },
    get: { summary: 'Not offered: no session stream.', security: [{ bearer: [] }], responses: { '405': notStateful } },
    delete: { summary: 'Not offered: no session to end.', security: [{ bearer: [] }], responses: { '405': notStateful } },
  },
} as const
