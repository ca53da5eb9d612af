import { describe, expect, it } from 'vitest'
import type { ChangeRecord, NodePath } from '../../shared/index.js'
import { api, errorCode, expectStatus } from '../helpers/index.js'
import { ctx, definition, ownedServer, pull, putSubscription } from './contextual-helpers.js'

/**
 * [CTX21] [STO10] Parameters and errors as a worker sends them (found by an outside look, stop 42).
 */
describe('contextual parameters and errors, kept as written or refused by name', () => {
  const env = ownedServer()

  it('a parameter named like a member every object has (constructor, toString) is refused when the definition is written', async () => {
    const { ts, owner, space } = env
    for (const name of ['toString', 'constructor', 'valueOf', 'hasOwnProperty']) {
      const consumer = definition(`${space}/inD`, { Parameters: { [name]: { Type: 'string' } } })
      const r1 = await putSubscription(ts.url, owner.token, `${space}/sD-${name}`, consumer)
      expect(r1.status, name).toBe(422)
      const reaction = definition(`${space}/inD`, { Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' }, [name]: { Type: 'string' } } } } })
      const r2 = await putSubscription(ts.url, owner.token, `${space}/sE-${name}`, reaction)
      expect(r2.status, name).toBe(422)
      expect(JSON.stringify(r2.body), name).toMatch(/every object has already/)
    }
  })

  it('a json parameter holding a "__proto__" member is committed with it, as a PATCH of the same value is', async () => {
    const { ts, owner, space } = env
    const def = definition(`${space}/inF`, { Reactions: { annotate: { Command: 'patch', Target: '{event.path}', Parameters: { Data: { Type: 'json' } } } } })
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/sF`, def), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inF`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    expectStatus(await c.next(`${space}/sF`), 200)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inF/d`, 'Document', {}), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inF/h`, 'Document', {}), 201)
    const body = '{"Data":{"__proto__":{"x":1},"y":2}}'
    const patched = await fetch(`${ts.url}/api/nodes/${space}/inF/h`, { method: 'PATCH', headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/merge-patch+json' }, body })
    expect(patched.status).toBe(200)
    const { item } = await pull(ts.url, owner.token, `${space}/sF`)
    const token = item.reactions.find((x) => x.name === 'annotate')!.causationToken
    const reacted = await fetch(`${ts.url}/api/contextual/react`, { method: 'POST', headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' }, body: `{"causationToken":${JSON.stringify(token)},"params":${body}}` })
    expect(reacted.status).toBe(200)
    const stored = async (p: string) => JSON.stringify((await api(ts.url, owner.token).getNode(`${space}/inF/${p}`)).body.content)
    expect(await stored('h')).toBe('{"Data":{"__proto__":{"x":1},"y":2}}')
    expect(await stored('d')).toBe(await stored('h'))
  })

  it("a nack's error holding a NUL or half an emoji is refused by name on every storage (SQLite kept it, PostgreSQL refused it), and the item stays leased to its worker", async () => {
    const { ts, owner, space } = env
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/sN`, definition(`${space}/inN`, { Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 } })), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inN`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    const { consumerId } = expectStatus(await c.next(`${space}/sN`), 200).body
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inN/d`, 'Document', {}), 201)
    const { item } = await pull(ts.url, owner.token, `${space}/sN`)
    for (const error of ['bad\u0000reason', 'half \ud83d']) {
      const n = await c.nack(consumerId, item, 0, error)
      expect(n.status).toBe(400)
      expect(errorCode(n)).toBe('invalid_request')
    }
    const st = expectStatus(await c.status(consumerId), 200).body as { leased: number; dead: number }
    expect([st.leased, st.dead]).toEqual([1, 0])
    expect(expectStatus(await c.nack(consumerId, item, 0, 'readable reason'), 200).body.state).toBe('dead')
  })
})

describe('[CTX18] an item that could not be built', () => {
  const env = ownedServer()

  it('goes back to its consumer at once (it stayed leased to nobody for its whole lease): the pull the error asks for gets it', async () => {
    const { ts, owner, space } = env
    const sub = `${space}/sU`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/inU`, { Limits: { LeaseSeconds: 600, MaxInFlight: 1, MaxAttempts: 3 } })), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inU`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    const { consumerId } = expectStatus(await c.next(sub), 200).body
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/inU/d`, 'Document', {}), 201)
    // A busy node: the head moves on at every read of it, through every hydration try, by a
    // commit to the node the item reads.
    const storage = ts.server.storage as { lastVersion(): Promise<number>; changesSince(v: number, limit: number): Promise<ChangeRecord[]> }
    const real = { lastVersion: storage.lastVersion.bind(storage), changesSince: storage.changesSince.bind(storage) }
    let bump = 0
    storage.lastVersion = async () => (await real.lastVersion()) + bump++
    storage.changesSince = async (v) => [{ version: v + 1, path: `${space}/inU/d` as NodePath, nodeType: 'Document', kind: 'Updated' }]
    const r = await c.next(sub)
    Object.assign(storage, real)
    expect(errorCode(r)).toBe('unavailable')
    const again = expectStatus(await c.next(sub), 200).body
    expect(again.item?.event.path).toBe(`${space}/inU/d`)
    expect(again.item?.attempt).toBe(2)
    expect(expectStatus(await c.status(consumerId), 200).body.leased).toBe(1)
  })
})
