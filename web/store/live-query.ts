import { Dexie } from 'dexie'
import { Observable } from 'rxjs'

/**
 * A live query that re-runs at most once per `throttleMs` after a write to one of `tables`
 * (in this tab or another: Dexie relays `storagemutated` between tabs).
 *
 * Dexie's own liveQuery re-runs on every commit. When a reconnect settles a thousand outbox
 * entries one ack at a time, that is a thousand re-runs of every open list and counter; here
 * a burst costs one re-run per window, and a view is never more than `throttleMs` stale.
 */
export function liveStoreQuery<T>(db: Dexie, tables: readonly string[], query: () => Promise<T>, throttleMs = 40): Observable<T> {
  const prefixes = tables.map((t) => `idb://${db.name}/${t}/`)
  return new Observable<T>((sub) => {
    let closed = false
    let running = false
    let dirty = false
    let timer: ReturnType<typeof setTimeout> | null = null
    const run = async () => {
      if (closed) return
      running = true
      dirty = false
      try {
        const value = await query()
        if (!closed) sub.next(value)
      } catch (e) {
        if (!closed) sub.error(e)
        return
      } finally {
        running = false
      }
      if (dirty) schedule()
    }
    const schedule = () => {
      if (closed) return
      if (running) {
        dirty = true
        return
      }
      if (timer) return
      timer = setTimeout(() => {
        timer = null
        void run()
      }, throttleMs)
    }
    const onMutated = (parts: Record<string, unknown>) => {
      for (const key of Object.keys(parts)) {
        if (prefixes.some((p) => key.startsWith(p))) return schedule()
      }
    }
    Dexie.on.storagemutated.subscribe(onMutated)
    void run()
    return () => {
      closed = true
      if (timer) clearTimeout(timer)
      Dexie.on.storagemutated.unsubscribe(onMutated)
    }
  })
}
