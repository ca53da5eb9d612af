import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { z } from 'zod'

/**
 * [CTX20] The causation token: the fields a reaction is bound to, sealed with AES-256-GCM
 * (authenticated encryption) under the server's key. A client can neither read nor forge nor
 * alter one; any change to a byte fails the tag and opens to null.
 */
export const CausationClaims = z.strictObject({
  /** database id and history incarnation */
  db: z.string(),
  inc: z.number().int(),
  /** subscription identity: definition hash, operation, consumer id, consumer name */
  def: z.string(),
  op: z.string(),
  consumer: z.string(),
  name: z.string(),
  /** event and lease attempt */
  event: z.string(),
  attempt: z.number().int(),
  /**
   * [CTX24] the lease's token, hashed: an attempt number repeats after a re-drive, a lease token
   * never (absent in tokens sealed by older servers: they authorize no new commit)
   */
  lease: z.string().optional(),
  /**
   * principal and the capability revision the reaction was offered under (a digest; a number in
   * tokens sealed by older servers, which still open so a repeat resolves its outcome, and never
   * match a digest, so they authorize no new commit)
   */
  principal: z.string(),
  rev: z.union([z.string(), z.number().int()]),
  /** target command: reaction name, command id, resolved target path */
  reaction: z.string(),
  command: z.string(),
  target: z.string(),
  /** the request that pulled the item (root of the causation chain) */
  root: z.string(),
  /** expiry, ms since the epoch (the lease's) */
  exp: z.number(),
})
export type CausationClaims = z.infer<typeof CausationClaims>

const IV_BYTES = 12
const TAG_BYTES = 16
/** Bounds what `open` decrypts: a token is a few hundred bytes. */
export const MAX_TOKEN_CHARS = 4096

export function sealClaims(key: Buffer, claims: CausationClaims): string {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  const body = Buffer.concat([cipher.update(JSON.stringify(claims), 'utf8'), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')
}

/** The claims of an authentic token; null for anything else (wrong key, altered, malformed). */
export function openClaims(key: Buffer, token: unknown): CausationClaims | null {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) return null
  const raw = Buffer.from(token, 'base64url')
  if (raw.length <= IV_BYTES + TAG_BYTES) return null
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES))
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
    const text = Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
    const parsed = CausationClaims.safeParse(JSON.parse(text))
    return parsed.success ? parsed.data : null
  } catch {
    return null
  }
}
