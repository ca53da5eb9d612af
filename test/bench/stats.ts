/** The p-th percentile (0–100) of samples in any order (nearest rank); NaN when there are none. */
export function percentile(samples: readonly number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

/** A figure to `d` decimals, as the tables print it. */
export const round = (n: number, d = 2): number => Number(n.toFixed(d))
