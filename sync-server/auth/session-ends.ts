import { WeftError } from '../../shared/index.js'
import type { Session } from './auth-service.js'

/** setTimeout's largest delay: a session ending later is looked at again then. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Where revocations are announced (AuthService.onRevoked). */
export interface Revocations {
  onRevoked(listener: (tokenHash: string) => void): () => void
}

/** A call's view of its session: `signal` aborts when the session ends; `release` when the call does. */
export interface SessionWatch {
  /** Aborted, its reason a WeftError `unauthorized`, when the token is revoked or expires. */
  readonly signal: AbortSignal
  release(): void
}

/**
 * [AUTH8] What ends with a session besides its sockets: a long poll (HTTP, MCP, gRPC) and a
 * wake-up stream each watch their token, and stop when it is revoked (logout) or expires. The
 * token is checked when a request starts; without this, a request that waits went on for its
 * whole wait after a logout, and handed out work written after it. One revocation listener
 * serves every call; each call has one timer for its expiry (unref'd, cleared when it ends).
 */
export class SessionEnds {
  private readonly byToken = new Map<string, Set<AbortController>>()
  private readonly unsubscribe: () => void

  constructor(
    revocations: Revocations,
    private readonly now: () => number = Date.now,
  ) {
    this.unsubscribe = revocations.onRevoked((hash) => {
      for (const c of [...(this.byToken.get(hash) ?? [])]) c.abort(new WeftError('unauthorized', 'Signed out: this token was revoked; sign in again.'))
    })
  }

  watch(session: Pick<Session, 'tokenHash' | 'expiresAt'>): SessionWatch {
    const ended = new AbortController()
    let set = this.byToken.get(session.tokenHash)
    if (!set) this.byToken.set(session.tokenHash, (set = new Set()))
    set.add(ended)
    let timer: NodeJS.Timeout | null = null
    const arm = () => {
      timer = null
      const left = session.expiresAt - this.now()
      if (left <= 0) return ended.abort(new WeftError('unauthorized', 'The session expired; sign in again.'))
      timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS))
      timer.unref()
    }
    arm()
    let released = false
    return {
      signal: ended.signal,
      release: () => {
        if (released) return
        released = true
        if (timer) clearTimeout(timer)
        set.delete(ended)
        if (set.size === 0 && this.byToken.get(session.tokenHash) === set) this.byToken.delete(session.tokenHash)
      },
    }
  }

  /** Calls being watched now (tests: none is left behind). */
  get watching(): number {
    let n = 0
    for (const set of this.byToken.values()) n += set.size
    return n
  }

  stop(): void {
    this.unsubscribe()
  }
}
