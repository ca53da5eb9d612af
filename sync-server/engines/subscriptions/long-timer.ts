import { realClock, type CancelTimer, type Clock } from '../kit/index.js'

export type { CancelTimer }

/**
 * A timer at an instant (a FireAt, a NextRetryAt) on the engine's clock. A past-due instant fires
 * on the next turn, not inside the caller's stack. The kit's wall clock chains waits past
 * setTimeout's 2^31-1 ms (~24.8 days), re-reading the time each hop, so a far FireAt is not fired
 * at once (MAX_TIMEOUT_MS).
 */
export function scheduleAt(at: number, fire: () => void, clock: Clock = realClock): CancelTimer {
  return clock.setTimeout(fire, Math.max(0, at - clock.now()))
}
