import type { ReactiveController, ReactiveControllerHost } from 'lit'
import { app } from '../app-context.js'
import type { MemberView } from '../../shared/subscription.js'

/** Names learned per space (`GET /api/spaces/{space}/members`), shared by every element of the page. */
const bySpace = new Map<string, Promise<ReadonlyMap<string, string>>>()
/** Names learned from presence (who is in a room says who they are: the server stamps it). */
const seen = new Map<string, string>()

async function loadMembers(space: string): Promise<ReadonlyMap<string, string>> {
  const { client } = app()
  // Only a space answers the members call: a home or Admin would only log a 404 in the console.
  const row = await client.store.getIndexRow(space)
  if (row && row.nodeType !== 'Space') return new Map()
  const token = app().session.token
  try {
    const res = await fetch(`/api/spaces/${encodeURIComponent(space)}/members`, { headers: { Authorization: `Bearer ${token}` } })
    if (!res.ok) return new Map()
    const body = (await res.json()) as { members?: MemberView[] }
    return new Map((body.members ?? []).filter((m) => m.name || m.email).map((m) => [m.subject, (m.name || m.email)!]))
  } catch {
    return new Map()
  }
}

/**
 * People by name, not by id: `nameOf(userId)` answers the signed-in person's own name, names
 * the server stamped on presence, and the members of the space a node lives in (asked once per
 * space and page). The host re-renders when a name arrives. An id nobody could name reads
 * "someone outside this space" (never the raw id; it is kept in `idOf` for a title).
 */
export class PeopleController implements ReactiveController {
  private space = ''
  private names: ReadonlyMap<string, string> = new Map()

  constructor(private readonly host: ReactiveControllerHost) {
    host.addController(this)
  }

  hostConnected(): void {}

  /** The space (first path segment) whose members name the people of `path`. */
  setPath(path: string): void {
    const space = path.split('/')[0] ?? ''
    if (space === this.space) return
    this.space = space
    if (!space || space === 'Admin' || space === app().session.userId) return
    let p = bySpace.get(space)
    if (!p) {
      p = loadMembers(space)
      bySpace.set(space, p)
    }
    void p.then((names) => {
      if (this.space !== space) return
      this.names = names
      this.host.requestUpdate()
    })
  }

  /** Presence users are named by the server: remember them. */
  learn(users: readonly { id: string; name: string }[]): void {
    for (const u of users) if (u.id && u.name) seen.set(u.id, u.name)
  }

  nameOf(userId: string): string {
    const { session } = app()
    if (userId === session.userId) return `${session.name} (you)`
    if (userId === 'system') return 'Weft (the server)'
    return this.names.get(userId) ?? seen.get(userId) ?? 'someone outside this space'
  }
}
