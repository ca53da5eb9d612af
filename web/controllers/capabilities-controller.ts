import type { ReactiveController, ReactiveControllerHost } from 'lit'
import { app } from '../app-context.js'
import type { Capabilities } from '../api/index.js'

/**
 * [WEB15] What the caller may do on one node, asked of the server (GET /api/permissions/{path}),
 * which answers with the very checks its writes make: a User's Email, a run's Status, deleting a
 * profile are refused to everyone but `system`, whatever the role. Asked again when the key
 * changes (the page's path, or the permission mask the socket reports). Offline, or before it
 * answers, `value` is null and a page falls back on the `/mux` permission mask.
 */
export class CapabilitiesController implements ReactiveController {
  value: Capabilities | null = null
  private key = ''
  private asked = 0

  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  hostConnected(): void {}

  /** Forgets the answer (the page moved to another node): until asked again, the mask decides. */
  reset(): void {
    this.key = ''
    this.value = null
    this.asked++
  }

  /** Call from `willUpdate` with the node's path and anything whose change should ask again. */
  watch(path: string, key: string): void {
    const next = `${path}\u0000${key}`
    if (next === this.key) return
    const samePath = this.key.startsWith(`${path}\u0000`)
    this.key = next
    if (!samePath) this.value = null
    const ticket = ++this.asked
    app()
      .client.api.capabilities(path)
      .then((c) => {
        if (ticket !== this.asked) return
        this.value = c
        this.host.requestUpdate()
      })
      .catch(() => {
        // Offline or not readable: the mask (and the server, on write) still decide.
      })
  }

  /** May the caller write `field`: the server's answer, else `fallback` (the mask's Update). */
  mayWrite(field: string, fallback: boolean): boolean {
    const c = this.value
    if (!c) return fallback
    return Object.prototype.hasOwnProperty.call(c.fields, field) ? c.fields[field]! : c.newFields
  }
}
