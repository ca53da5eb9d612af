import type { ReactiveController, ReactiveControllerHost } from 'lit'
import { app } from '../app-context.js'

/**
 * The display names of nodes a page lists by path (a subscription, the event of a dead letter),
 * asked of the server once each: a person reads "問い合わせ 5", not `space-1/inbox-5`. Until the
 * answer (or when it cannot be read) the path's last segment stands in.
 */
export class NodeNames implements ReactiveController {
  private readonly known = new Map<string, string | null>()

  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  hostConnected(): void {}

  nameOf(path: string): string {
    const known = this.known.get(path)
    if (known) return known
    if (known === undefined) {
      this.known.set(path, null)
      app()
        .client.api.getNode(path)
        .then(
          (n) => {
            if (!n.name) return
            this.known.set(path, n.name)
            this.host.requestUpdate()
          },
          () => undefined,
        )
    }
    return path.slice(path.lastIndexOf('/') + 1)
  }
}
