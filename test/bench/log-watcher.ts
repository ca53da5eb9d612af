/**
 * The activities bench's watcher of a log, in its own thread (a browser is its own process: in
 * the server's thread its decoding would be counted as the server's latency). A stock y-websocket
 * provider on `/sync/{path}`; reports bytes, updates and each line's age (its Text is the
 * Date.now() at which the script logged it).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { stockProvider } from '../helpers/index.js'

const { url, path, token, n } = workerData as { url: string; path: string; token: string; n: number }
const client = stockProvider(url, path, token)
await client.synced()
let bytes = 0
let updates = 0
let seen = 0
const ages: number[] = []
client.doc.on('update', (u: Uint8Array) => {
  bytes += u.length
  updates++
  const arr = client.content.get('Messages') as { length: number; slice(start: number): { Text: string }[] } | undefined
  if (!arr || typeof arr.slice !== 'function' || arr.length <= seen) return
  const nowMs = Date.now()
  for (const item of arr.slice(seen)) ages.push(nowMs - Number(item.Text))
  seen = arr.length
  if (seen >= n) {
    client.destroy()
    parentPort!.postMessage({ t: 'done', bytes, updates, ages })
  }
})
parentPort!.postMessage({ t: 'synced' })
