import { afterEach, describe, expect, it } from 'vitest'
import { CONTENT_MAP, docToJson, type NodePath } from '../../../shared/index.js'
import { SIM_CLOSE, SimClient, SimServer, quiesce, type TransportKind } from './sim-network.js'

/**
 * The transport contract: what every socket kind guarantees a client, whatever it frames. Run by
 * transport-contract.test.ts for `/sync/{path}` and `/mux` alike, over the simulated network
 * (real sessions, real node service, real SQLite file), so a new transport is one more line.
 */
export function transportContract(kind: TransportKind): void {
  describe(`transport contract: /${kind}`, () => {
    let server: SimServer | null = null
    afterEach(async () => {
      await server?.stop()
      server = null
    })

    /** Editors c0..c(n-1) (c0 the Admin), then `viewers` Viewers, each connected to the doc. */
    async function cast(editors: number, viewers = 0): Promise<{ server: SimServer; clients: SimClient[] }> {
      const s = (server = await SimServer.start({ kind, clients: editors, viewers }))
      const clients = s.principals.map((p, i) => {
        const c = new SimClient(`c${i}`, kind, s.path)
        c.connect(s.connect(p))
        return c
      })
      await quiesce(clients)
      return { server: s, clients }
    }

    const set = (c: SimClient, key: string, value: number) => c.doc.transact(() => c.doc.getMap(CONTENT_MAP).set(key, value))

    it(`[SIM2] /${kind}: an edit reaches the server and every other client, and nothing is refused`, async () => {
      const { server: s, clients } = await cast(3)
      set(clients[0]!, 'a', 1)
      set(clients[2]!, 'b', 2)
      await quiesce(clients)
      const room = await s.room()
      expect(docToJson(room.doc)).toMatchObject({ a: 1, b: 2 })
      for (const c of clients) expect(c.json()).toEqual(docToJson(room.doc))
      expect(clients.flatMap((c) => c.refusals)).toEqual([])
    })

    it(`[SIM3] /${kind}: edits made while disconnected merge on reconnect, on both sides`, async () => {
      const { server: s, clients } = await cast(2)
      const [a, b] = clients as [SimClient, SimClient]
      a.link!.close(SIM_CLOSE)
      set(a, 'offline', 1)
      set(b, 'online', 2)
      await quiesce(clients)
      expect(b.json()).not.toHaveProperty('offline')
      a.connect(s.connect(s.principals[0]!))
      await quiesce(clients)
      const room = await s.room()
      expect(docToJson(room.doc)).toMatchObject({ offline: 1, online: 2 })
      expect(a.json()).toEqual(docToJson(room.doc))
      expect(b.json()).toEqual(docToJson(room.doc))
    })

    it(`[SIM4] /${kind}: a Viewer's edit is refused by name; the server and the others never see it, and the connection stays`, async () => {
      const { server: s, clients } = await cast(1, 1)
      const [editor, viewer] = clients as [SimClient, SimClient]
      set(editor, 'kept', 1)
      await quiesce(clients)
      set(viewer, 'forged', 1)
      await quiesce(clients)
      expect(viewer.refusals.join(' ')).toMatch(/forbidden/)
      const room = await s.room()
      expect(docToJson(room.doc)).toEqual({ kept: 1 })
      expect(editor.json()).toEqual({ kept: 1 })
      expect(viewer.link!.open).toBe(true)
      expect(viewer.link!.serverClose).toBeNull()
    })

    it(`[SIM5] /${kind}: a node that does not exist is refused not_found (4404), and nothing is created`, async () => {
      const { server: s } = await cast(1)
      const missing = 'SimSpace/missing' as NodePath
      const c = new SimClient('lost', kind, missing)
      c.connect(s.connect(s.principals[0]!, missing))
      await quiesce([c])
      expect(c.refusals.join(' ')).toMatch(/not_found/)
      // /sync closes the socket with the room; /mux refuses the room and keeps the socket.
      if (kind === 'sync') expect(c.link!.serverClose?.code).toBe(4404)
      else expect(c.link!.open).toBe(true)
      expect(await s.nodes.get(s.principals[0]!, missing)).toBeNull()
    })

    it(`[SIM6] /${kind}: bytes that are not the protocol close the connection with 1002, and the room goes on`, async () => {
      const { server: s, clients } = await cast(2)
      const [bad, good] = clients as [SimClient, SimClient]
      bad.link!.toServer.push(new Uint8Array([200, 1, 2, 3]))
      await quiesce(clients)
      expect(bad.link!.serverClose?.code).toBe(1002)
      set(good, 'after', 1)
      await quiesce([good])
      expect(docToJson((await s.room()).doc)).toMatchObject({ after: 1 })
    })
  })
}
