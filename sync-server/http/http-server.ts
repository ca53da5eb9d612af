import { createReadStream, promises as fs } from 'node:fs'
import path from 'node:path'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { WeftError, decodePathParam, asWeftError, isWeftError, rawPathname, userPrincipal, type Principal } from '../../shared/index.js'
import type { Session, SessionWatch } from '../auth/index.js'
import type { Route, RouteRequest, RouteResult } from './route.js'

export interface HttpHandlerOptions {
  routes: () => readonly Route[]
  /** The session behind a request's token, or null. */
  authenticate(token: string | null): Promise<Session | null>
  /** [AUTH8] Watches a session for a request that waits or streams (RouteRequest.sessionEnd). */
  watchSession?(session: Session): SessionWatch
  maxPayloadBytes: number
  staticDir: string
  log: Logger
  /** [OPS3] Told the code of every refused request (the metrics' refusals by code). */
  onRefused?(code: string): void
}

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
}

/**
 * [AUTH4] The token of an HTTP request: the `Authorization: Bearer` header only. A token in the
 * URL ends up in access logs, proxies and browser history, so `?token=` is not read on HTTP (it
 * stays for the WebSocket upgrade, where a browser cannot set headers).
 */
export function bearerToken(req: IncomingMessage): string | null {
  const h = req.headers.authorization
  if (h && /^Bearer\s+/i.test(h)) return h.replace(/^Bearer\s+/i, '').trim()
  return null
}

/** Reads the body within the limit; a larger body is refused before it is buffered whole. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0)
    if (declared > limit) {
      req.resume()
      reject(new WeftError('payload_too_large', `The body is ${declared} bytes; the limit is ${limit}.`))
      return
    }
    const chunks: Buffer[] = []
    let size = 0
    let failed = false
    req.on('data', (chunk: Buffer) => {
      if (failed) return
      size += chunk.length
      if (size > limit) {
        failed = true
        reject(new WeftError('payload_too_large', `The body is over the limit of ${limit} bytes.`))
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => failed || resolve(Buffer.concat(chunks)))
    req.on('error', (e) => failed || reject(e))
  })
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return
  if (status === 204 || body === undefined) {
    res.writeHead(status, headers)
    res.end()
    return
  }
  const payload = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload), ...headers })
  res.end(payload)
}

function sendError(res: ServerResponse, err: WeftError): void {
  // [AUTH3] A refusal that says when to come back says it in the header clients read.
  const retry = (err.details as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds
  sendJson(res, err.httpStatus, err.toJSON(), typeof retry === 'number' ? { 'retry-after': String(retry) } : {})
}

/** The request handler: API routes, then the built web app with an SPA fallback. */
export function createHttpHandler(opts: HttpHandlerOptions) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let url: URL
    try {
      url = new URL(req.url ?? '/', 'http://localhost')
    } catch {
      return sendError(res, new WeftError('invalid_request', 'Malformed URL.'))
    }
    const method = (req.method ?? 'GET').toUpperCase()
    const pathname = rawPathname(req.url)
    try {
      if (pathname.startsWith('/api/') || pathname === '/healthz' || pathname === '/metrics' || pathname === '/mcp' || pathname === '/mcp/') {
        const result = await dispatch(opts, req, res, url, pathname, method)
        if (result) sendJson(res, result.status, result.body, result.headers)
        return
      }
      if (method === 'GET' || method === 'HEAD') return await serveStatic(opts.staticDir, url.pathname, res)
      throw new WeftError('not_found', `Nothing at ${method} ${url.pathname}.`)
    } catch (e) {
      const err = asWeftError(e, 'Something went wrong on the server; the change was not applied.')
      // A text refusal (told as a 400) is kept in the log too: a server bug can look the same.
      if (!isWeftError(e)) opts.log[err.code === 'internal' ? 'error' : 'warn']({ err: e, method, path: url.pathname }, 'request failed')
      else if (err.code === 'payload_too_large') res.setHeader('connection', 'close')
      opts.onRefused?.(err.code)
      sendError(res, err)
    }
  }
}

async function dispatch(opts: HttpHandlerOptions, req: IncomingMessage, res: ServerResponse, url: URL, pathname: string, method: string): Promise<RouteResult | null> {
  let pathMatched = false
  for (const route of opts.routes()) {
    const m = route.pattern.exec(pathname)
    if (!m) continue
    pathMatched = true
    if (route.method !== method) continue
    let principal: Principal | null = null
    const session = await opts.authenticate(bearerToken(req))
    if (session) principal = userPrincipal(session.userId)
    if (route.auth !== false && !principal) {
      if (url.searchParams.has('token')) {
        throw new WeftError('unauthorized', 'Send the token as Authorization: Bearer <token>; a token in the URL (?token=) is read on WebSocket upgrades only.')
      }
      throw new WeftError('unauthorized', 'Sign in first: send Authorization: Bearer <token>.')
    }
    let watch: SessionWatch | null = null
    const params: Record<string, string> = {}
    for (const [k, v] of Object.entries(m.groups ?? {})) params[k] = v === undefined ? '' : decodePathParam(v)
    const request: RouteRequest = {
      req,
      res,
      params,
      query: url.searchParams,
      principal,
      sessionEnd: () => {
        if (!watch) {
          watch = session && opts.watchSession ? opts.watchSession(session) : { signal: new AbortController().signal, release: () => undefined }
          // Released however the response ends (sent, or the client gone).
          const release = watch.release
          if (res.closed) release()
          else res.once('close', release)
        }
        return watch.signal
      },
      json: async () => {
        const body = await readBody(req, opts.maxPayloadBytes)
        if (body.length === 0) throw new WeftError('invalid_json', 'The request needs a JSON body.')
        try {
          return JSON.parse(body.toString('utf8')) as unknown
        } catch (e) {
          throw new WeftError('invalid_json', `The body is not valid JSON: ${(e as Error).message}`)
        }
      },
    }
    return route.handler(request)
  }
  if (pathMatched) throw new WeftError('invalid_request', `${method} is not supported on ${pathname}.`)
  throw new WeftError('not_found', `No API at ${pathname}.`)
}

async function serveStatic(root: string, pathname: string, res: ServerResponse): Promise<void> {
  let rel: string
  try {
    rel = decodeURIComponent(pathname)
  } catch {
    throw new WeftError('invalid_path', 'Malformed URL.')
  }
  const resolved = path.resolve(root, '.' + path.posix.normalize('/' + rel))
  if (!resolved.startsWith(path.resolve(root))) throw new WeftError('not_found', 'Not found.')
  let file = resolved
  let stat = await fs.stat(file).catch(() => null)
  if (!stat || stat.isDirectory()) {
    // SPA fallback: the client router owns every non-file path.
    if (path.extname(rel) && !stat) throw new WeftError('not_found', `No file ${pathname}.`)
    file = path.join(root, 'index.html')
    stat = await fs.stat(file).catch(() => null)
    if (!stat) {
      sendJson(res, 200, { name: 'weft', message: 'The web app is not built; run `npm run build`. The API is at /api.' })
      return
    }
  }
  const ext = path.extname(file)
  const immutable = /\/assets\//.test(file)
  res.writeHead(200, {
    'content-type': MIME[ext] ?? 'application/octet-stream',
    'content-length': stat.size,
    // Hashed assets never change; the shell and the service worker must always be revalidated.
    'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
  })
  createReadStream(file).pipe(res)
}
