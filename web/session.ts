import type { Session } from './sync/index.js'

/** Where the session is kept; another tab's change of it arrives as a `storage` event. */
export const SESSION_KEY = 'weft.session'

/** The signed-in session survives reloads (and offline starts) in localStorage. */
export function loadSession(): Session | null {
  try {
    const raw = localStorage.getItem(SESSION_KEY)
    if (!raw) return null
    const s = JSON.parse(raw) as Partial<Session>
    return typeof s.userId === 'string' && typeof s.token === 'string' ? { userId: s.userId, token: s.token, name: s.name ?? s.userId } : null
  } catch {
    return null
  }
}

export function saveSession(session: Session): void {
  localStorage.setItem(SESSION_KEY, JSON.stringify(session))
}

export function clearSession(): void {
  localStorage.removeItem(SESSION_KEY)
}
