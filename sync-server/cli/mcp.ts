/** `weft`: not built yet. */
export const usage = 'weft mcp                  the MCP tools over stdio (WEFT_URL, WEFT_TOKEN)'

export function run(_args: readonly string[]): Promise<number> {
  process.stderr.write('weft mcp: not built yet\n')
  return Promise.resolve(2)
}
