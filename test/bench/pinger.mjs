// A /healthz pinger in its own process (the activities bench's flood part): a client as a real
// one is, not sharing the server's event loop. Pings PINGER_URL every 2 ms, one at a time, and
// writes "<epoch ms at send> <round trip ms>" per ping to stdout until its stdin closes.
import { performance } from 'node:perf_hooks'
import process from 'node:process'
import { setInterval, setTimeout } from 'node:timers'

// Node ≥ 18 has fetch; the lint config knows no Node globals in .mjs files.
const { fetch } = globalThis
const url = `${process.env.PINGER_URL}/healthz`
let stop = false
process.stdin.on('end', () => (stop = true)).resume()
const out = []
setInterval(() => {
  if (out.length) process.stdout.write(out.splice(0).join(''))
}, 100)
while (!stop) {
  const at = performance.timeOrigin + performance.now()
  const t = performance.now()
  const res = await fetch(url).catch(() => null)
  await res?.arrayBuffer()
  out.push(`${Math.round(at)} ${(performance.now() - t).toFixed(3)}\n`)
  await new Promise((r) => setTimeout(r, 2))
}
process.stdout.write(out.join(''))
process.exit(0)
