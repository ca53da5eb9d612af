/**
 * Runs work nobody awaits. A failure after the store was closed (sign-out, a test's stop) is
 * expected and dropped; anything else is logged, never left as an unhandled rejection.
 */
export function background(work: Promise<unknown>): void {
  work.catch((e: unknown) => {
    if (e instanceof Error && (e.name === 'DatabaseClosedError' || e.name === 'AbortError')) return
    console.warn('[weft] background task failed', e)
  })
}
