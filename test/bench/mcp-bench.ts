/**
 * [MCP5] [MCP6] What the MCP surface costs over the HTTP API it wraps, side by side on one server
 * (loopback, SQLite in a temp dir), alternating call by call so load hits all three alike:
 *  - `httpGetP50Ms`: `GET /api/nodes/{path}` with fetch;
 *  - `mcpHttpGetP50Ms`: `weft_get` of the same node through the SDK's client over Streamable
 *    HTTP: JSON-RPC, and a new McpServer + transport for the request (stateless);
 *  - `mcpStdioGetP50Ms`: the same through `bin/weft mcp` (stdio → the relay → `/mcp`);
 *  - `*RatioToHttp`: the p50 ratios, and at p25 (`*P25RatioToHttp`: on a loaded machine the
 *    median mostly measures waiting for a core; the lower quartile is nearer the work itself);
 *  - `buildServerUs`: building one caller's McpServer alone (the per-request cost of statelessness).
 * Run alone: `npx tsx test/bench/mcp-bench.ts` prints JSON.
 */
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import pino from 'pino'
import { userPrincipal, type UserId } from '../../shared/index.js'
import { loadMcpServer } from '../../sync-server/mcp/index.js'
import { api, createDocument, createSpace, signup, startTestServer } from '../helpers/index.js'
import { connectHttp, connectStdio } from '../integration/mcp-helpers.js'
import { percentile, round } from './stats.js'

const CALLS = Number(process.env.MCP_BENCH_CALLS ?? 300)
const BUILDS = 2000

export async function benchMcp(): Promise<Record<string, number>> {
  const ts = await startTestServer()
  try {
    const user = await signup(ts.url)
    const space = await createSpace(ts.url, user.token)
    const path = await createDocument(ts.url, user.token, `${space}/doc`, { Title: 'bench', Body: 'x'.repeat(2000) })
    const http = await connectHttp(ts.url, user.token)
    const stdio = await connectStdio(ts.url, user.token)
    const a = api(ts.url, user.token)
    const samples = { http: [] as number[], mcpHttp: [] as number[], mcpStdio: [] as number[] }
    const time = async (into: number[], call: () => Promise<unknown>) => {
      const t0 = performance.now()
      await call()
      into.push(performance.now() - t0)
    }
    for (let i = 0; i < CALLS + 20; i++) {
      const warm = i < 20
      await time(warm ? [] : samples.http, () => a.getNode(path))
      await time(warm ? [] : samples.mcpHttp, () => http.callTool({ name: 'weft_get', arguments: { path } }))
      await time(warm ? [] : samples.mcpStdio, () => stdio.callTool({ name: 'weft_get', arguments: { path } }))
    }
    await http.close()
    await stdio.close()
    const deps = { contextual: ts.server.contextual, nodes: ts.server.nodes, maxJsonDepth: 64, log: pino({ level: 'silent' }) }
    const principal = userPrincipal(user.userId as UserId)
    const { buildMcpServer } = await loadMcpServer()
    const t0 = performance.now()
    for (let i = 0; i < BUILDS; i++) buildMcpServer(principal, deps)
    const buildServerUs = ((performance.now() - t0) * 1000) / BUILDS
    const p50 = (xs: number[]) => percentile(xs, 50)
    const p25 = (xs: number[]) => percentile(xs, 25)
    return {
      httpGetP25Ms: round(p25(samples.http)),
      mcpHttpGetP25Ms: round(p25(samples.mcpHttp)),
      mcpStdioGetP25Ms: round(p25(samples.mcpStdio)),
      mcpHttpP25RatioToHttp: round(p25(samples.mcpHttp) / p25(samples.http)),
      mcpStdioP25RatioToHttp: round(p25(samples.mcpStdio) / p25(samples.http)),
      httpGetP50Ms: round(p50(samples.http)),
      mcpHttpGetP50Ms: round(p50(samples.mcpHttp)),
      mcpStdioGetP50Ms: round(p50(samples.mcpStdio)),
      mcpHttpGetP99Ms: round(percentile(samples.mcpHttp, 99)),
      mcpHttpRatioToHttp: round(p50(samples.mcpHttp) / p50(samples.http)),
      mcpStdioRatioToHttp: round(p50(samples.mcpStdio) / p50(samples.http)),
      buildServerUs: round(buildServerUs, 0),
    }
  } finally {
    await ts.cleanup()
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  benchMcp().then(
    (f) => console.log(JSON.stringify(f, null, 2)),
    (err: unknown) => {
      console.error(err)
      process.exit(1)
    },
  )
}
