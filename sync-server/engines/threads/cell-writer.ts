import { SYSTEM, WeftError, type NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import type { Pacer } from '../kit/index.js'
import { cutText, toStorableText } from '../../../shared/storable-text.js'

/**
 * Most characters an agent may stream ahead of what the cell has durably taken: past this, its
 * `emit` waits for the write in flight (back-pressure), so a fast model cannot pile up memory.
 */
const MAX_BUFFERED_CHARS = 4_096

/**
 * [THR24] Most characters a response cell's Text may hold (default): a model or script that never
 * stops fails its round instead of growing one node without bound (a person's message is at most
 * 100,000; an answer may be longer, not unbounded).
 */
export const DEFAULT_MAX_RESPONSE_CHARS = 1_000_000

/**
 * The response cell's text as a round streams it ([THR4][THR10]): per-token work coalesced per
 * round. At most ONE write of the cell is in flight; tokens emitted meanwhile are carried by the
 * next write together, so a thousand rounds streaming at once cost a write per round per storage
 * turn, not one per token (each write is a Yjs transaction, a commit and a feed event).
 *
 * A resumed round ([THR7]) re-emits from the start: text the cell already holds is not written
 * again; the first token that differs makes the round's own text the cell's.
 */
/**
 * What of a round's text can be written now: a high surrogate at its end waits for its pair (a
 * model may stream one emoji as two deltas; written alone it was refused, and the round failed),
 * unless the round is over; a NUL or a lone surrogate elsewhere becomes U+FFFD.
 */
function writable(text: string, ended: boolean): string {
  const last = text.charCodeAt(text.length - 1)
  const held = !ended && last >= 0xd800 && last <= 0xdbff
  return toStorableText(held ? text.slice(0, -1) : text)
}

export class CellWriter {
  private text = ''
  /** end() was called: nothing more comes, a held half is written as it is (U+FFFD). */
  private ended = false
  /** The round's text differs from what the cell held when it (re)started. */
  private diverged = false
  private written: string
  private inFlight: Promise<void> | null = null
  private failure: unknown = null

  constructor(
    private readonly nodes: Pick<NodeApi, 'patch'>,
    private readonly path: NodePath,
    private readonly existing: string,
    /** Shared by the engine's rounds: a thousand cells woken at once write a few per turn of the loop. */
    private readonly pacer: Pacer,
    private readonly maxChars: number = DEFAULT_MAX_RESPONSE_CHARS,
  ) {
    this.written = existing
  }

  /** Appends `token`; resolves at once unless too much is waiting for the cell (then after a write). */
  async emit(token: string): Promise<void> {
    if (this.failure) throw this.failure
    if (this.text.length + token.length > this.maxChars) {
      // What fits is kept (it is written by end()); the round fails saying why.
      this.text += cutText(token, this.maxChars - this.text.length)
      this.pump()
      throw new WeftError('payload_too_large', `The answer passed ${this.maxChars} characters (the response cell's limit); the round was stopped there.`)
    }
    this.text += token
    if (!this.diverged) {
      if (this.existing.startsWith(this.text)) return
      this.diverged = true
    }
    this.pump()
    if (this.text.length - this.written.length > MAX_BUFFERED_CHARS) await this.inFlight
    if (this.failure) throw this.failure
  }

  /** Resolves once everything emitted is in the cell (throws the write's error if one failed). */
  async end(): Promise<void> {
    this.ended = true
    // A held half (the stream ended inside a pair) goes out now; a resumed round that brought
    // nothing new leaves the cell as it was.
    if (this.diverged) this.pump()
    while (this.inFlight) await this.inFlight
    if (this.failure) throw this.failure
  }

  private pump(): void {
    if (this.inFlight || this.failure || writable(this.text, this.ended) === this.written) return
    let next = writable(this.text, this.ended)
    this.inFlight = this.pacer
      .turn()
      .then(() => {
        // Tokens emitted while it waited for its turn go out in this write too.
        next = writable(this.text, this.ended)
        return this.nodes.patch(SYSTEM, this.path, { Text: next }, 'engine')
      })
      .then(
        () => {
          this.written = next
        },
        (err: unknown) => {
          this.failure = err
        },
      )
      .finally(() => {
        this.inFlight = null
        this.pump()
      })
  }
}
