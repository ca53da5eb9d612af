import type { Session } from './sync/index.js'

const KEY = 'weft.session'

/** The signed-in session survives reloads (and offline starts) in localStorage. */
export function loadSession(): Session | null {
  try {
    const raw = localStorage.getItem(KEY)
    if (!raw) return null
    const s = JSON.parse(raw) as Partial<Session>
    return typeof s.userId === 'string' && typeof s.token === 'string' ? { userId: s.userId, token: s.token, name: s.name ?? s.userId } : null
  } catch {
    return null
  }
}

export function saveSession(session: Session): void {
  localStorage.setItem(KEY, JSON.stringify(session))
}

export function clearSession(): void {
  localStorage.removeItem(KEY)
}
