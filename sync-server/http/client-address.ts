import { BlockList, isIP } from 'node:net'
import type { IncomingMessage } from 'node:http'

/**
 * [AUTH5] The address a request came from, for the login throttle's per-address count. Behind a
 * reverse proxy every request's socket is the proxy's; TRUSTED_PROXIES names the proxies
 * (addresses or CIDR ranges, comma-separated) whose `X-Forwarded-For` is believed. The header is
 * read from the right (the hop nearest us) past every trusted address: the first one that is not
 * a trusted proxy is the client. A client cannot choose its count by sending the header itself:
 * without a trusted proxy in front, or past the first untrusted hop, what it wrote is ignored.
 */
export class ClientAddresses {
  private constructor(private readonly trusted: BlockList | null) {}

  /** From TRUSTED_PROXIES; throws a message naming the entry that is neither an address nor a range. */
  static parse(spec: string | undefined): ClientAddresses {
    const entries = (spec ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
    if (entries.length === 0) return new ClientAddresses(null)
    const list = new BlockList()
    for (const entry of entries) {
      const [address, bits, extra] = entry.split('/')
      const family = isIP(address ?? '')
      const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits)
      if (family === 0 || extra !== undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 6 ? 128 : 32) || (bits !== undefined && !/^\d+$/.test(bits))) {
        throw new Error(`TRUSTED_PROXIES: "${entry}" is neither an IP address nor a CIDR range (e.g. 10.0.0.0/8).`)
      }
      list.addSubnet(address!, prefix, family === 6 ? 'ipv6' : 'ipv4')
    }
    return new ClientAddresses(list)
  }

  private isTrusted(address: string): boolean {
    const family = isIP(address)
    return family !== 0 && this.trusted!.check(address, family === 6 ? 'ipv6' : 'ipv4')
  }

  of(req: Pick<IncomingMessage, 'headers' | 'socket'>): string {
    const peer = plain(req.socket.remoteAddress ?? 'unknown')
    if (!this.trusted || !this.isTrusted(peer)) return peer
    const header = req.headers['x-forwarded-for']
    const hops = (Array.isArray(header) ? header.join(',') : header ?? '').split(',').map((s) => plain(s.trim())).filter((s) => s !== '')
    let client = peer
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!
      if (isIP(hop) === 0) break // garbage from beyond the trusted hops: the last good hop stands
      client = hop
      if (!this.isTrusted(hop)) break
    }
    return client
  }
}

/** `::ffff:10.0.0.1` is `10.0.0.1`. */
function plain(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  return m ? m[1]! : address
}
