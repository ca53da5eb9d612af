import { lineTime } from './run-log-text.js'
/**
 * A run's facts in words: which limit stopped it, when it ran and for how long. Pure functions
 * (no DOM): the run page and the run list share them.
 */

/**
 * A run's status as a person reads it. `Warning` is a run that finished and logged a warning:
 * shown as "Warning" it read as a run that had not finished properly.
 */
export function runStatusWord(status: string): string {
  return status === 'Warning' ? 'Succeeded with warnings' : status
}

/** What each server limit means to the person whose run it stopped (README's settings table). */
const LIMITS: readonly [RegExp, string][] = [
  [/^SCRIPT_MEMORY_MB$/, 'it needed more memory than a run may use'],
  [/^SCRIPT_TIMEOUT_MS$/, 'it ran longer than a run may take'],
  [/^SCRIPT_LOG_MAX_LINES$/, 'it wrote more log lines than a run may keep'],
  [/^SCRIPT_LOG_MAX_BYTES$/, 'its log grew larger than a run may keep'],
  [/^SCRIPT_CANCEL_GRACE_MS$/, 'it was cancelled and did not stop within the grace period'],
  [/^ACTIVITY_WATCHDOG_MS$/, 'it reported nothing (no log line, no progress) for too long'],
  [/^MAX_PAYLOAD_BYTES$/, 'it tried to write a value larger than the server accepts'],
  [/IN_FLIGHT/, 'it had more Mesh calls waiting at once than a run may'],
  [/PER_USER|RUNS_PER/, 'too many runs of the same person were running at once'],
  [/^SCRIPT_/, 'it went past a limit the server sets on scripts'],
]

export interface StoppedBy {
  /** The setting's name, as the README and GET /api/config list it. */
  limit: string
  /** In words: "it needed more memory than a run may use". */
  reason: string
  /** The configured value when the error states it ("64 MB"). */
  value: string | null
}

/** The limit an Error text names (e.g. "…past SCRIPT_MEMORY_MB (64 MB)…"), or null. */
export function limitOf(error: string): StoppedBy | null {
  const re = /\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b(?:\s*\(([^)]{1,40})\))?(?:\s*(?:=|of|is)\s*([0-9][0-9_,.]*\s*[A-Za-z%]*))?/g
  for (let m = re.exec(error); m; m = re.exec(error)) {
    const name = m[1]!
    const hit = LIMITS.find(([pattern]) => pattern.test(name))
    if (hit) return { limit: name, reason: hit[1], value: (m[2] ?? m[3] ?? '').trim() || null }
  }
  return null
}

/** "3.2 s", "4 min 05 s", "1 h 02 min". */
function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return ''
  if (ms < 1000) return `${Math.round(ms)} ms`
  const s = ms / 1000
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`
}

/**
 * A moment a person reads: the time today, else the date and the time. The time is written as
 * the log's lines write theirs (lineTime, 24-hour), so a run page never shows "06:14:42 PM" above
 * lines stamped "18:14:55".
 */
export function formatWhen(iso: string, now = new Date()): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return ''
  const time = lineTime(iso)
  return d.toDateString() === now.toDateString() ? `today ${time}` : `${d.toLocaleDateString([], { day: 'numeric', month: 'short', year: 'numeric' })} ${time}`
}

/** How long a run took (or has been running), from its Start and End. */
export function runDuration(start: unknown, end: unknown, now = Date.now()): string {
  if (typeof start !== 'string') return ''
  const a = Date.parse(start)
  const b = typeof end === 'string' ? Date.parse(end) : now
  return Number.isNaN(a) || Number.isNaN(b) ? '' : formatDuration(b - a)
}
