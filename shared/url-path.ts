import { WeftError } from './errors.js'

/**
 * The path of a request target exactly as sent (`/sync/a%2Fb?token=…` → `/sync/a%2Fb`): WHATWG
 * URL parsing would resolve `..` and hide it. Used by HTTP routing and the socket upgrade alike.
 */
export function rawPathname(requestTarget: string | undefined): string {
  const raw = requestTarget ?? '/'
  const q = raw.indexOf('?')
  return q < 0 ? raw : raw.slice(0, q)
}

/**
 * Decodes a path taken from a URL segment by segment, so an encoded slash (`%2F`) cannot
 * smuggle a separator into a segment.
 */
export function decodePathParam(raw: string): string {
  return raw
    .split('/')
    .map((segment) => {
      let decoded: string
      try {
        decoded = decodeURIComponent(segment)
      } catch {
        throw new WeftError('invalid_path', `Malformed percent-encoding in ${JSON.stringify(segment)}.`)
      }
      if (decoded.includes('/')) throw new WeftError('invalid_path', `A path segment cannot contain '/': ${JSON.stringify(segment)}.`)
      return decoded
    })
    .join('/')
}
