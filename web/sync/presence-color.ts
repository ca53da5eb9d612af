/**
 * A person's caret colour in shared editors, the same on every replica: a hash of the user id
 * into a fixed palette (dark enough for white name labels; the light variant tints their
 * selection). Stored in the awareness state as `user.color` / `user.colorLight`, the fields
 * y-codemirror.next's remote selections read.
 *
 * Eight colours and a hash mean two people on one node share a colour one time in eight, and
 * then nobody can tell whose caret is whose. So a replica passes the colours it must avoid
 * (`taken`) and gets the first free one from its hash slot on (see `colorsToAvoid`).
 */
const PALETTE = ['#1f6fd1', '#c2410c', '#15803d', '#9333ea', '#be123c', '#0e7490', '#a16207', '#4d7c0f'] as const

export interface PresenceColor {
  color: string
  colorLight: string
}

export function presenceColor(userId: string, taken: ReadonlySet<string> = new Set()): PresenceColor {
  let h = 0
  for (let i = 0; i < userId.length; i++) h = (Math.imul(h, 31) + userId.charCodeAt(i)) | 0
  const start = Math.abs(h) % PALETTE.length
  let color: string = PALETTE[start]!
  for (let i = 0; i < PALETTE.length; i++) {
    const candidate = PALETTE[(start + i) % PALETTE.length]!
    if (!taken.has(candidate)) {
      color = candidate
      break
    }
  }
  // '33': 20 % alpha, so the text under a remote selection stays readable.
  return { color, colorLight: `${color}33` }
}

/**
 * The colours a replica must not take: those shown by other people's replicas on the node whose
 * awareness client id is lower than its own. Each yields only to lower ids, so the lowest keeps
 * its hash colour, the next avoids it, and so on: the choice settles in one round on every
 * replica and never swaps back and forth (two replicas avoiding each other would). Tabs of the
 * same person are not avoided.
 */
export function colorsToAvoid(
  self: { clientId: number; userId: string },
  states: Iterable<[number, { user?: { id?: unknown; color?: unknown } }]>,
): Set<string> {
  const taken = new Set<string>()
  for (const [clientId, state] of states) {
    const user = state.user
    if (clientId >= self.clientId || !user || user.id === self.userId || typeof user.color !== 'string') continue
    taken.add(user.color)
  }
  return taken
}
