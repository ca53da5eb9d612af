/**
 * What a typed name becomes as a path segment, and the next name whose segment is free.
 * Two names can clean to the same segment ("Week?1" and "Week 1" are both `Week_1`): the
 * check is on the segment, never on the name.
 */
export function segmentForName(name: string): string {
  return name.trim().replace(/[^A-Za-z0-9_.@-]/g, '_')
}

/**
 * "Week 1" → "Week 1 (2)", "Week 1 (3)", … until `isTaken` says the segment is free. A name
 * that already ends in " (n)" counts on from n.
 */
export async function nextFreeName(name: string, isTaken: (segment: string) => Promise<boolean>, maxTries = 50): Promise<string | null> {
  const trimmed = name.trim()
  const m = /^(.*) \((\d+)\)$/.exec(trimmed)
  const base = m ? m[1]! : trimmed
  let n = m ? Number(m[2]) + 1 : 2
  for (let i = 0; i < maxTries; i++, n++) {
    const candidate = `${base} (${n})`
    if (!(await isTaken(segmentForName(candidate)))) return candidate
  }
  return null
}
