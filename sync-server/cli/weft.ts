/**
 * The `weft` command line: one entry, a subcommand each.
 *
 *   weft backup <file>    a consistent snapshot of a running server's storage (cli/backup.ts)
 *   weft restore <file>   a verified restore that bumps the history incarnation (cli/restore.ts)
 *   weft mcp              the MCP tools over stdio, for agents that spawn a process (cli/mcp.ts)
 *
 * Each subcommand module exports `run(args): Promise<number>` (the exit code) and `usage`.
 */
interface Subcommand {
  readonly usage: string
  run(args: readonly string[]): Promise<number>
}

const subcommands: Record<string, () => Promise<Subcommand>> = {
  backup: () => import('./backup.js'),
  restore: () => import('./restore.js'),
  mcp: () => import('./mcp.js'),
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv
  const load = name === undefined ? undefined : subcommands[name]
  if (load === undefined) {
    const lines = await Promise.all(Object.values(subcommands).map(async (l) => `  ${(await l()).usage}`))
    process.stderr.write(`usage: weft <command> [args]\n${lines.join('\n')}\n`)
    return name === undefined || name === '--help' || name === '-h' ? 0 : 2
  }
  return (await load()).run(rest)
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err: unknown) => {
    process.stderr.write(`weft: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  },
)
