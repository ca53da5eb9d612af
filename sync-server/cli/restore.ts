/** `weft`: not built yet. */
export const usage = 'weft restore <file>       a verified restore that bumps the history incarnation'

export function run(_args: readonly string[]): Promise<number> {
  process.stderr.write('weft restore: not built yet\n')
  return Promise.resolve(2)
}
