import { background } from './background.js'

/**
 * A read that reasons to run coalesce into: the returned function runs `run` now, or, while a run
 * is under way (which may have missed what asked), once more right after it; any number of asks
 * meanwhile make that one more run. Nobody awaits the runs ([background] logs a failure).
 */
export function oneAtATime(run: () => Promise<void>): () => void {
  let running = false
  let again = false
  const soon = (): void => {
    if (running) {
      again = true
      return
    }
    running = true
    background(
      run().finally(() => {
        running = false
        if (again) {
          again = false
          soon()
        }
      }),
    )
  }
  return soon
}
