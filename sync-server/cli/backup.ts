/** `weft`: not built yet. */
export const usage = 'weft backup <file>        a consistent snapshot of the storage, taken while the server runs'

export function run(_args: readonly string[]): Promise<number> {
  process.stderr.write('weft backup: not built yet\n')
  return Promise.resolve(2)
}
