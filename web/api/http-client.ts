import type { AdminOverview, ChangeRecord, JsonObject, MergePatch, MeshNode } from '../../shared/index.js'

export interface AuthResult {
  userId: string
  token: string
}

export interface Me {
  userId: string
  email: string
  name: string
  pinnedPaths: string[]
  /** [OPS10] The operator's page is shown to this user. */
  operator?: boolean
}

/** `GET /api/config`: what the server accepts, known before an edit is sent. */
export interface ServerConfig {
  maxPayloadBytes: number
  maxJsonDepth: number
  protocolVersion: number
}

/** One quick-find result (`GET /api/search`). */
export interface SearchHit {
  path: string
  name: string
  nodeType: string
  snippet: string
  /** The names of its ancestors (those the caller may read), the top first: where it is. */
  where?: string[]
}

/** An HTTP answer with an error body `{ error: { code, message } }`. */
/** [WEB15] What the caller may do on one node, by the server's own checks. */
export interface Capabilities {
  path: string
  nodeType: string
  permissions: string[]
  fields: Record<string, boolean>
  newFields: boolean
  canDelete: boolean
  canCreate: boolean
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** [MOVE3] A `moved` refusal's new path. */
    readonly to?: string,
  ) {
    super(message)
    this.name = 'HttpError'
  }
}

/** The request never got an answer (offline, server down): the caller may queue and retry. */
export class NetworkError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'NetworkError'
  }
}

/** A page of the change feed and the version to continue from. */
export interface ChangePage {
  items: ChangeRecord[]
  next: number
}

/** The feed cursor after a page: never behind `since` nor behind what the page holds. */
export function nextVersion(since: number, items: readonly ChangeRecord[], next: unknown): number {
  let v = since
  if (typeof next === 'number' && Number.isInteger(next) && next > v) v = next
  for (const c of items) if (c.version > v) v = c.version
  return v
}

function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/')
}

/** The sync server's HTTP API (DESIGN.md "Public contract"). */
export class HttpApi {
  constructor(
    private readonly baseUrl: string,
    private readonly token: () => string | null,
  ) {}

  private async request<T>(method: string, url: string, body?: unknown, contentType = 'application/json', extraHeaders: Record<string, string> = {}): Promise<T> {
    const headers: Record<string, string> = { ...extraHeaders }
    const token = this.token()
    if (token) headers.Authorization = `Bearer ${token}`
    if (body !== undefined) headers['Content-Type'] = contentType
    let res: Response
    try {
      res = await fetch(this.baseUrl + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    } catch (e) {
      throw new NetworkError((e as Error).message)
    }
    if (res.status === 204) return undefined as T
    const text = await res.text()
    let json: unknown = null
    try {
      json = text ? JSON.parse(text) : null
    } catch {
      // not JSON (e.g. a proxy's error page)
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: string; message?: string; to?: string } } | null)?.error
      throw new HttpError(res.status, err?.code ?? 'http_' + res.status, err?.message ?? `${method} ${url} failed with ${res.status}`, typeof err?.to === 'string' ? err.to : undefined)
    }
    return json as T
  }

  signup(email: string, password: string, name: string): Promise<AuthResult> {
    return this.request('POST', '/api/auth/signup', { email, password, name })
  }

  login(email: string, password: string): Promise<AuthResult> {
    return this.request('POST', '/api/auth/login', { email, password })
  }

  logout(): Promise<void> {
    return this.request('POST', '/api/auth/logout', {})
  }

  me(): Promise<Me> {
    return this.request('GET', '/api/me')
  }

  /** [FIND2] `GET /api/search`: quick find over the nodes the caller may read, best first. */
  async search(q: string, limit = 20): Promise<SearchHit[]> {
    const res = await this.request<{ items: SearchHit[] }>('GET', `/api/search?q=${encodeURIComponent(q)}&limit=${limit}`)
    return res.items
  }

  getNode(path: string): Promise<MeshNode> {
    return this.request('GET', `/api/nodes/${encodePath(path)}`)
  }

  /**
   * `parent` '' lists the top-level nodes the caller can read, up to `limit` of them: fewer
   * means that is all of them. [FEED3] The server filters while paging and a page may be short
   * (rows the caller cannot read were stepped over), so its `next` cursor is followed until
   * `limit` items or the end.
   */
  async listChildren(parent: string, limit = 500): Promise<MeshNode[]> {
    const items: MeshNode[] = []
    let after: string | undefined
    for (;;) {
      const cursor = after === undefined ? '' : `&after=${encodeURIComponent(after)}`
      const res = await this.request<{ items: MeshNode[]; next?: string }>('GET', `/api/nodes?parent=${encodeURIComponent(parent)}&limit=${limit - items.length}${cursor}`)
      items.push(...res.items)
      // No cursor, or a path one that does not advance (an older server): the end. A sealed
      // cursor ([QUERY1], `_q.`…) is a position, not a path: it is followed as it is.
      const sealed = (c: string | undefined) => c !== undefined && c.startsWith('_q.')
      if (items.length >= limit || typeof res.next !== 'string' || (after !== undefined && !sealed(after) && !sealed(res.next) && res.next <= after)) return items.slice(0, limit)
      after = res.next
    }
  }

  /** Nodes of a type whose content field equals a value, anywhere the caller can read (one page). */
  async queryByField(nodeType: string, field: string, value: string, limit = 200): Promise<MeshNode[]> {
    const q = `nodeType=${encodeURIComponent(nodeType)}&where.${encodeURIComponent(field)}=${encodeURIComponent(value)}&limit=${limit}`
    return (await this.request<{ items: MeshNode[] }>('GET', `/api/nodes?${q}`)).items
  }

  /** Nodes of a type anywhere the caller can read (one page, ordered by path). */
  async queryByType(nodeType: string, limit = 200): Promise<MeshNode[]> {
    return (await this.request<{ items: MeshNode[] }>('GET', `/api/nodes?nodeType=${encodeURIComponent(nodeType)}&limit=${limit}`)).items
  }

  putNode(path: string, body: { nodeType: string; name?: string; content: JsonObject }): Promise<MeshNode> {
    return this.request('PUT', `/api/nodes/${encodePath(path)}`, body)
  }

  /**
   * Creates a node and never replaces one: `If-None-Match: *` makes the server answer 412
   * `already_exists` when the path is taken (DESIGN.md, [CREATE1]). No GET first: a probe for a
   * free path answers 404, which the browser logs as an error on every create.
   */
  createNode(path: string, body: { nodeType: string; name?: string; content: JsonObject }): Promise<MeshNode> {
    return this.request('PUT', `/api/nodes/${encodePath(path)}`, body, 'application/json', { 'If-None-Match': '*' })
  }

  /**
   * True when the caller can see a node at `path`, asked of its parent's listing (always a 200:
   * a GET of a free path would log a 404). A node they cannot read is not listed; the create's
   * If-None-Match still refuses it.
   */
  async nodeExists(path: string): Promise<boolean> {
    const slash = path.lastIndexOf('/')
    const parent = slash < 0 ? '' : path.slice(0, slash)
    const q = `parent=${encodeURIComponent(parent)}&limit=1000`
    const { items } = await this.request<{ items: MeshNode[] }>('GET', `/api/nodes?${q}`)
    return items.some((n) => n.path === path)
  }

  /** [WEB15] What the caller may do on a node (GET /api/permissions/{path}). */
  capabilities(path: string): Promise<Capabilities> {
    return this.request('GET', `/api/permissions/${encodePath(path)}`)
  }

  /** The server's limits; null when the server has no `/api/config` (older builds). */
  async config(): Promise<ServerConfig | null> {
    try {
      return await this.request<ServerConfig>('GET', '/api/config')
    } catch (e) {
      if (e instanceof HttpError) return null
      throw e
    }
  }

  patchNode(path: string, patch: MergePatch): Promise<MeshNode> {
    return this.request('PATCH', `/api/nodes/${encodePath(path)}`, patch, 'application/merge-patch+json')
  }

  /**
   * One page of the change feed: changes after `since` the caller may read, oldest first, and
   * `next`, the version to continue from ([FEED1]: past everything the server examined, readable
   * or not, so it advances even when `items` is empty). A server without `next` gives the last
   * item's version.
   */
  async changesSince(since: number, limit = 500): Promise<ChangePage> {
    const res = await this.request<{ items: ChangeRecord[]; next?: number }>('GET', `/api/changes?since=${since}&limit=${limit}`)
    return { items: res.items, next: nextVersion(since, res.items, res.next) }
  }

  deleteNode(path: string): Promise<void> {
    return this.request('DELETE', `/api/nodes/${encodePath(path)}`)
  }

  /** [MOVE8] The name changes, the path stays. */
  renameNode(path: string, name: string): Promise<MeshNode> {
    return this.request('POST', `/api/nodes/${encodePath(path)}/rename`, { name })
  }

  /** [MOVE1] Moves the node and its subtree to `to`. */
  moveNode(path: string, to: string): Promise<{ path: string; moved: number }> {
    return this.request('POST', `/api/nodes/${encodePath(path)}/move`, { to })
  }

  /** [MOVE5] The app's Delete: to the trash of its space. */
  trashNode(path: string): Promise<{ trashPath: string; originalPath: string }> {
    return this.request('POST', `/api/nodes/${encodePath(path)}/trash`, {})
  }

  /** [OPS10] The operator's overview (403 `forbidden` for anyone but an operator). */
  /** [WEB126] How many contextual consumers the caller has (over every subscription): whether "My consumers" is worth a link. */
  async myConsumerCount(): Promise<number> {
    return (await this.request<{ total: number }>('POST', '/api/contextual/mine', { limit: 1 })).total
  }

  adminOverview(): Promise<AdminOverview> {
    return this.request('GET', '/api/admin/overview')
  }

  /** [MOVE6] Admins of the space. */
  listTrash(space: string): Promise<{ items: TrashEntry[] }> {
    return this.request('GET', `/api/trash/${encodePath(space)}`)
  }

  /** [THR2] Posts a message to a thread; the same `id` again adds no second cell. */
  postMessage(thread: string, body: { id: string; text: string }): Promise<{ path: string }> {
    return this.request('POST', `/api/nodes/${encodePath(thread)}/messages`, body)
  }

  restoreNode(trashPath: string): Promise<{ path: string }> {
    return this.request('POST', `/api/nodes/${encodePath(trashPath)}/restore`, {})
  }
}

/** [MOVE6] A trashed subtree, as the trash page lists it. */
export interface TrashEntry {
  path: string
  originalPath: string
  name: string
  nodeType: string
  deletedBy: string
  /** Their display name (null: none known). */
  deletedByName?: string | null
  deletedAt: string
}
