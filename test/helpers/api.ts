import { randomUUID } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import type { ChangeRecord, JsonObject, MeshNode } from '../../shared/index.js'

/**
 * A small fetch wrapper for the HTTP API of DESIGN.md. It never throws on an HTTP status: tests
 * assert the status and the error `code` themselves. Only a network failure rejects.
 */
export interface ApiResponse<T = unknown> {
  status: number
  /** Parsed JSON when the response is JSON, the raw text otherwise ('' for 204). */
  body: T
  headers: Headers
}

export interface ErrorBody {
  error: { code: string; message: string }
}

export interface RequestOptions {
  /** Serialised with JSON.stringify unless `rawBody` is given. */
  body?: unknown
  /** Sent as is (for malformed JSON, oversized bodies, ...). */
  rawBody?: string
  contentType?: string
  headers?: Record<string, string>
}

export interface Api {
  readonly url: string
  readonly token: string | undefined
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse<T>>
  get<T = unknown>(path: string): Promise<ApiResponse<T>>
  post<T = unknown>(path: string, body?: unknown): Promise<ApiResponse<T>>
  /** `GET /api/nodes/{path}`. */
  getNode(path: string): Promise<ApiResponse<MeshNode & Partial<ErrorBody>>>
  /** `PUT /api/nodes/{path}` with `{ nodeType, content, name? }`. */
  putNode(path: string, nodeType: string, content?: JsonObject, name?: string): Promise<ApiResponse<MeshNode & Partial<ErrorBody>>>
  /** `PATCH /api/nodes/{path}` as `application/merge-patch+json`. */
  patchNode(path: string, patch: unknown): Promise<ApiResponse<MeshNode & Partial<ErrorBody>>>
  deleteNode(path: string): Promise<ApiResponse<unknown>>
  /** `GET /api/nodes?...`; `where` becomes `where.<field>=<value>`. */
  queryNodes(q: { parent?: string; nodeType?: string; where?: Record<string, string>; limit?: number }): Promise<ApiResponse<{ items: MeshNode[] } & Partial<ErrorBody>>>
  changesSince(since: number): Promise<ApiResponse<{ items: ChangeRecord[] } & Partial<ErrorBody>>>
}

/** Node paths go into the URL segment by segment, so `/` stays a separator. */
export function nodeUrlPath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/')
}

export function api(url: string, token?: string): Api {
  const base = url.replace(/\/+$/, '')
  const request = async <T>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { ...opts.headers }
    if (token) headers.authorization = `Bearer ${token}`
    let body: string | undefined
    if (opts.rawBody !== undefined) body = opts.rawBody
    else if (opts.body !== undefined) body = JSON.stringify(opts.body)
    if (body !== undefined) headers['content-type'] = opts.contentType ?? 'application/json'
    const res = await fetch(base + path, { method, headers, body })
    const text = await res.text()
    let parsed: unknown = text
    if ((res.headers.get('content-type') ?? '').includes('json') && text.length > 0) {
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = text
      }
    }
    return { status: res.status, body: parsed as T, headers: res.headers }
  }
  return {
    url: base,
    token,
    request,
    get: (path) => request('GET', path),
    post: (path, body) => request('POST', path, { body }),
    getNode: (path) => request('GET', `/api/nodes/${nodeUrlPath(path)}`),
    putNode: (path, nodeType, content = {}, name) =>
      request('PUT', `/api/nodes/${nodeUrlPath(path)}`, { body: name === undefined ? { nodeType, content } : { nodeType, name, content } }),
    patchNode: (path, patch) =>
      request('PATCH', `/api/nodes/${nodeUrlPath(path)}`, { body: patch, contentType: 'application/merge-patch+json' }),
    deleteNode: (path) => request('DELETE', `/api/nodes/${nodeUrlPath(path)}`),
    queryNodes: (q) => {
      const params = new URLSearchParams()
      if (q.parent !== undefined) params.set('parent', q.parent)
      if (q.nodeType !== undefined) params.set('nodeType', q.nodeType)
      for (const [field, value] of Object.entries(q.where ?? {})) params.set(`where.${field}`, value)
      if (q.limit !== undefined) params.set('limit', String(q.limit))
      return request('GET', `/api/nodes?${params.toString()}`)
    },
    changesSince: (since) => request('GET', `/api/changes?since=${since}`),
  }
}

export interface TestUser {
  userId: string
  token: string
  email: string
  password: string
}

export const TEST_PASSWORD = 'correct horse battery staple'

/** A unique address per call, so tests sharing a server never collide. */
export function uniqueEmail(prefix = 'user'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}@test.weft.example`
}

/** `POST /api/auth/signup`; throws unless 201 (use `api().post` to test refusals). */
export async function signup(url: string, email = uniqueEmail(), password = TEST_PASSWORD, name = 'Test User'): Promise<TestUser> {
  const res = await api(url).post<{ userId: string; token: string }>('/api/auth/signup', { email, password, name })
  if (res.status !== 201) throw new Error(`signup ${email} answered ${res.status}: ${JSON.stringify(res.body)}`)
  return { userId: res.body.userId, token: res.body.token, email, password }
}

/** `POST /api/auth/login`; throws unless 200. */
export async function login(url: string, email: string, password = TEST_PASSWORD): Promise<{ userId: string; token: string }> {
  const res = await api(url).post<{ userId: string; token: string }>('/api/auth/login', { email, password })
  if (res.status !== 200) throw new Error(`login ${email} answered ${res.status}: ${JSON.stringify(res.body)}`)
  return res.body
}

/** Throws with the response in the message unless the status is one of `expected`. */
export function expectStatus<T>(res: ApiResponse<T>, ...expected: number[]): ApiResponse<T> {
  if (!expected.includes(res.status)) {
    throw new Error(`expected HTTP ${expected.join(' or ')}, got ${res.status}: ${JSON.stringify(res.body)}`)
  }
  return res
}

/** The `code` of an error response, or undefined. */
export function errorCode(res: ApiResponse<unknown>): string | undefined {
  const body = res.body as Partial<ErrorBody> | undefined
  return typeof body === 'object' && body !== null ? body.error?.code : undefined
}

/**
 * An HTTP request whose path is sent byte for byte. `fetch` normalises URLs (`a/../b` becomes
 * `b`, `%2e%2e` too), so path-validation tests need this to reach the server at all.
 */
export function rawHttp(
  url: string,
  method: string,
  rawPath: string,
  opts: { token?: string; body?: string; contentType?: string } = {},
): Promise<ApiResponse<unknown>> {
  const target = new URL(url)
  const headers: Record<string, string> = {}
  if (opts.token) headers.authorization = `Bearer ${opts.token}`
  if (opts.body !== undefined) {
    headers['content-type'] = opts.contentType ?? 'application/json'
    headers['content-length'] = String(Buffer.byteLength(opts.body))
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: target.hostname, port: target.port, method, path: rawPath, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          body = text
        }
        const h = new Headers()
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v)
        resolve({ status: res.statusCode ?? 0, body, headers: h })
      })
    })
    req.on('error', reject)
    if (opts.body !== undefined) req.write(opts.body)
    req.end()
  })
}
