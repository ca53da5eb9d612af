import { NetworkError, type SearchHit } from '../api/index.js'
import { app } from '../app-context.js'

/** Keystrokes closer together than this are one search (quick find, the link picker). */
export const FIND_DEBOUNCE_MS = 150

/**
 * The server's quick find (`GET /api/search`: only nodes the caller may read, anywhere in the
 * mesh); null when this device is offline or the server cannot be reached, so the caller falls
 * back to the nodes this device holds. Other errors are thrown.
 */
export async function searchOnline(q: string, limit: number): Promise<SearchHit[] | null> {
  if (!navigator.onLine) return null
  try {
    return await app().client.api.search(q, limit)
  } catch (e) {
    if (e instanceof NetworkError) return null
    throw e
  }
}
