/**
 * A person's caret colour in shared editors, the same on every replica: a hash of the user id
 * into a fixed palette (dark enough for white name labels; the light variant tints their
 * selection). Stored in the awareness state as `user.color` / `user.colorLight`, the fields
 * y-codemirror.next's remote selections read.
 */
const PALETTE = ['#1f6fd1', '#c2410c', '#15803d', '#9333ea', '#be123c', '#0e7490', '#a16207', '#4d7c0f'] as const

export interface PresenceColor {
  color: string
  colorLight: string
}

export function presenceColor(userId: string): PresenceColor {
  let h = 0
  for (let i = 0; i < userId.length; i++) h = (Math.imul(h, 31) + userId.charCodeAt(i)) | 0
  const color = PALETTE[Math.abs(h) % PALETTE.length]!
  // '33': 20 % alpha, so the text under a remote selection stays readable.
  return { color, colorLight: `${color}33` }
}
