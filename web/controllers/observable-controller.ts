import type { ReactiveController, ReactiveControllerHost } from 'lit'
import type { Observable, Subscription } from 'rxjs'

/**
 * Binds an observable to a Lit host: subscribes in hostConnected, unsubscribes in
 * hostDisconnected, and re-subscribes when the key (e.g. a path) changes. The host renders
 * `value` directly, so no second copy of the node lives in component state.
 */
export class ObservableController<T> implements ReactiveController {
  value: T | undefined
  error: unknown = null
  private sub: Subscription | null = null
  private key: string | null = null
  private connected = false
  private factory: (() => Observable<T>) | null = null

  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  /** Call from the host's `willUpdate` (or constructor) with the stream for the current key. */
  watch(key: string, factory: () => Observable<T>): void {
    if (key === this.key && this.factory) return
    this.key = key
    this.factory = factory
    this.value = undefined
    if (this.connected) this.resubscribe()
  }

  hostConnected(): void {
    this.connected = true
    this.resubscribe()
  }

  hostDisconnected(): void {
    this.connected = false
    this.sub?.unsubscribe()
    this.sub = null
  }

  private resubscribe(): void {
    this.sub?.unsubscribe()
    this.sub = null
    if (!this.factory) return
    this.sub = this.factory().subscribe({
      next: (v) => {
        this.value = v
        this.host.requestUpdate()
      },
      error: (e: unknown) => {
        this.error = e
        console.warn('[weft] stream failed', e)
        this.host.requestUpdate()
      },
    })
  }
}
