import type * as Y from 'yjs'
import * as random from 'lib0/random'
import { WeftError } from '../../shared/index.js'

/** A Yjs client id of a node and the principal that first wrote under it (storage's ClientBinding). */
export interface ClientBinding {
  client: number
  principal: string
}

/**
 * Who owns the server doc's own client id: the server itself. Not a principal name (parentheses
 * are not allowed in a user id), so no principal ever matches it.
 */
export const SERVER_DOC_CLIENT = '(server)'

const NONE: readonly ClientBinding[] = Object.freeze([])

/**
 * [ACC12] Which principal writes under each Yjs client id of one loaded node, so that nobody can
 * write under an id somebody else wrote with: another writer's structs at that id's next clock
 * would make the owner's own next edit "known" to Yjs, dropped, and its delete set applied on
 * its own. Loaded with the doc from storage (the bindings of every earlier residency), checked
 * on every client update (a map lookup per client the update writes under, usually one), and
 * persisted in the commit of the update that first uses an id ([STO2]: no Ack whose binding
 * could be lost). An id with structs but no binding (written before bindings existed) is bound
 * by its next writer.
 *
 * The server doc's own id belongs to the server: the server's writes (HTTP patches, engines,
 * catch-ups) never pass admission, so they are never refused, and no client may write under it.
 * Each residency gets a fresh random id, never one the doc or a binding already holds.
 */
export class ClientBindings {
  private readonly owners = new Map<number, string>()
  private serverClient: number | null = null
  private isServerClientStored = false

  constructor(bindings: readonly ClientBinding[] = NONE) {
    for (const b of bindings) this.owners.set(b.client, b.principal)
  }

  /** Binds the doc's own id to the server, first moving the doc off an id that is taken. */
  adoptServerDoc(doc: Y.Doc): void {
    if (this.serverClient === doc.clientID) return
    while (doc.store.clients.has(doc.clientID) || this.owners.has(doc.clientID)) doc.clientID = random.uint32()
    this.serverClient = doc.clientID
    this.isServerClientStored = false
  }

  /**
   * The bindings an update by `principal` under `clients` introduces (to `record` once it is
   * applied, and to store with its commit); `client_id_conflict` when one of the ids is bound to
   * somebody else. Decides without recording: a refused update binds nothing.
   */
  claim(principal: string, clients: ReadonlySet<number>, path: string): readonly ClientBinding[] {
    let fresh: ClientBinding[] | null = null
    for (const client of clients) {
      const owner = client === this.serverClient ? SERVER_DOC_CLIENT : this.owners.get(client)
      if (owner === principal) continue
      if (owner !== undefined) {
        throw new WeftError(
          'client_id_conflict',
          `Yjs client id ${client} of ${path} is another writer's; nothing was applied. Reload the node (a new client id) and send the edit again.`,
        )
      }
      ;(fresh ??= []).push({ client, principal })
    }
    return fresh ?? NONE
  }

  record(bindings: readonly ClientBinding[]): void {
    for (const b of bindings) this.owners.set(b.client, b.principal)
  }

  /** The server id's binding, handed out once per doc: stored with the first commit the server's doc writes. */
  serverBinding(): readonly ClientBinding[] | undefined {
    if (this.isServerClientStored || this.serverClient === null) return undefined
    this.isServerClientStored = true
    return [{ client: this.serverClient, principal: SERVER_DOC_CLIENT }]
  }
}
