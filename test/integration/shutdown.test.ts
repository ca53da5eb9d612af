import { connect } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { makeTempDir, removeDir, signup, spawnServer, type SpawnedServer } from '../helpers/index.js'

/**
 * [PROD2] A graceful shutdown is bounded: a request that never finishes (a client that sent half
 * its body) does not hold the process; its connection is cut after half of SHUTDOWN_TIMEOUT_MS and
 * the server still exits 0 with storage closed.
 */
describe('[PROD2] bounded shutdown', () => {
  const servers: SpawnedServer[] = []
  const dirs: string[] = []
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.kill('SIGKILL')))
    await Promise.all(dirs.splice(0).map(removeDir))
  })

  it('[PROD2] SIGTERM with a request stuck mid-body: the connection is cut, exit 0, storage closed', async () => {
    const dir = await makeTempDir('weft-shutdown-')
    dirs.push(dir)
    const server = await spawnServer({ dataDir: dir, env: { SHUTDOWN_TIMEOUT_MS: '8000' } })
    servers.push(server)
    const user = await signup(server.url)
    const socket = connect(server.port, '127.0.0.1')
    const cut = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.on('error', () => undefined)
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    // Headers and a tenth of the body the request announces: the server waits for the rest.
    socket.write(`PUT /api/nodes/${user.userId}/half HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${user.token}\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"nodeType":"Document",`)
    const exit = await server.kill('SIGTERM')
    await cut
    expect(exit, server.output().slice(-2_000)).toEqual({ code: 0, signal: null })
    expect(server.logs().some((l) => l.msg === 'closed')).toBe(true)
    expect(server.logs().some((l) => String(l.msg).includes('SHUTDOWN_TIMEOUT_MS'))).toBe(false)
  })
})
