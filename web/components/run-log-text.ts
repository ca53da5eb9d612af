/**
 * The run log's pure parts ([WEB24], [WEB25]): a line's time, search, and where an error says it
 * was thrown. No DOM: the run page and the unit tests share them.
 */

export interface LogLine {
  Level: string
  Text: string
  At: string
}

/** One formatter for every line: `toLocaleTimeString` builds a new one per call (a live log re-renders often). */
let clock: Intl.DateTimeFormat | null = null

/** A line's clock time, "14:03:07", in the reader's time zone; '' when the line has no valid time. */
export function lineTime(at: unknown): string {
  if (typeof at !== 'string') return ''
  const d = new Date(at)
  if (Number.isNaN(d.getTime())) return ''
  clock ??= new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
  return clock.format(d)
}

/** The 1-based numbers of the lines holding `query` (case-insensitive); every line when it is blank. */
export function matchingLines(lines: readonly LogLine[], query: string): number[] {
  const q = query.trim().toLowerCase()
  const out: number[] = []
  for (let i = 0; i < lines.length; i++) if (!q || lines[i]!.Text.toLowerCase().includes(q)) out.push(i + 1)
  return out
}

/** `text` cut where `query` occurs (case-insensitive), each piece marked when it is a hit. */
export function splitHits(text: string, query: string): { text: string; hit: boolean }[] {
  const q = query.trim().toLowerCase()
  if (!q) return [{ text, hit: false }]
  const lower = text.toLowerCase()
  const out: { text: string; hit: boolean }[] = []
  let from = 0
  for (let i = lower.indexOf(q); i !== -1; i = lower.indexOf(q, i + q.length)) {
    if (i > from) out.push({ text: text.slice(from, i), hit: false })
    out.push({ text: text.slice(i, i + q.length), hit: true })
    from = i + q.length
  }
  if (from < text.length) out.push({ text: text.slice(from), hit: false })
  return out
}

/** "… (line 3, column 7)" at the end of a run's Error (the engine adds it, script-location.ts). */
export function errorLocation(error: string): { line: number; column: number; message: string } | null {
  const m = /^(.*) \(line (\d+), column (\d+)\)$/s.exec(error)
  if (!m) return null
  return { message: m[1]!, line: Number(m[2]), column: Number(m[3]) }
}
