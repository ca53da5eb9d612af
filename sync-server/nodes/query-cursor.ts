import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import { WeftError } from '../../shared/index.js'

/** How a sealed query cursor starts: no node path does (`_` segments are reserved, `.` follows). */
export const SEALED_CURSOR_PREFIX = '_q.'
/** Longest cursor accepted back (a sealed one is longer than the path it hides). */
export const MAX_CURSOR_LENGTH = 4096

/**
 * [QUERY1] A query page that stops between two of the caller's readable regions continues at a
 * position that is not a readable path (a region boundary names a scope, maybe one the caller is
 * Denied). The position goes back to the client sealed: AES-256-GCM under a key of this process,
 * bound to the user, so it names nothing and cannot be forged. The IV is derived from the
 * plaintext (SIV-like), so one position seals to one cursor: paging is deterministic. A cursor
 * from before a restart no longer opens (`invalid_request`: list again from the start).
 */
export class CursorSealer {
  private readonly key = randomBytes(32)
  private readonly ivKey = randomBytes(32)

  seal(userId: string, from: string): string {
    const plain = Buffer.from(JSON.stringify([userId, from]), 'utf8')
    const iv = createHmac('sha256', this.ivKey).update(plain).digest().subarray(0, 12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    const body = Buffer.concat([cipher.update(plain), cipher.final()])
    return SEALED_CURSOR_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')
  }

  /** The position a cursor of `seal(userId, ...)` holds; throws `invalid_request` for anything else. */
  unseal(userId: string, cursor: string): string {
    const refuse = () => new WeftError('invalid_request', 'The `after` cursor is not one this server gave you (or it restarted since); list again from the start.')
    const raw = Buffer.from(cursor.slice(SEALED_CURSOR_PREFIX.length), 'base64url')
    if (raw.length < 29) throw refuse()
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12))
      decipher.setAuthTag(raw.subarray(12, 28))
      const plain = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
      const [owner, from] = JSON.parse(plain) as [unknown, unknown]
      if (owner !== userId || typeof from !== 'string') throw refuse()
      return from
    } catch {
      throw refuse()
    }
  }
}

export function isSealedCursor(after: string | undefined): after is string {
  return after !== undefined && after.startsWith(SEALED_CURSOR_PREFIX)
}
