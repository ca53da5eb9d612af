import { describe, expect, it } from 'vitest'
import type { JsonObject } from '../../shared/index.js'
import { MuxClient, api, errorCode, expectStatus, type ApiResponse } from '../helpers/index.js'
import { ctx, definition, ownedServer, pull, putSubscription } from './contextual-helpers.js'

/**
 * [CTX57] [CTX58] A walk (stop 48, findings 5 and 6): Japanese names were refused with "use
 * letters, digits and _" (they are letters), and the same edit through the app's sync socket was
 * refused as `invalid_content` (the node type's schema ran before the compiler there); typos in a
 * definition (`{evnt.path}`, an undeclared `{param.Team}`, `../etc`, NodeTypes ["Documnt"]) were
 * all accepted, and their reactions were then never offered with nothing saying why.
 */
describe('a definition is checked when it is written, alike on every transport', () => {
  const env = ownedServer()

  const japanese = (prefix: string): JsonObject => ({
    Operation: '仕分け',
    Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: prefix },
    Parameters: { チーム: { Type: 'string' } },
    Hydration: { 元: { Get: '{event.path}' } },
    Reactions: { 返信: { Command: 'patch', Target: '{event.path}', Parameters: { メモ: { Type: 'string', Required: true } } } },
  })

  it('[CTX57] names in any script are taken, and a reaction so named runs', async () => {
    const { ts, owner, space } = env
    const sub = `${space}/jp`
    expectStatus(await putSubscription(ts.url, owner.token, sub, japanese(`${space}/jpin`)), 201)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/jpin`, 'Document', {}), 201)
    const c = ctx(ts.url, owner.token)
    expectStatus(await c.next(sub), 200)
    expectStatus(await api(ts.url, owner.token).putNode(`${space}/jpin/a`, 'Document', {}), 201)
    const { item } = await pull(ts.url, owner.token, sub)
    expect(Object.keys(item.hydration)).toEqual(['元'])
    const r = expectStatus(await c.react(item, '返信', { メモ: 'よし' }, { ack: true }), 200).body
    expect(r.outcome).toMatchObject({ status: 'committed', reaction: '返信' })
    expect(expectStatus(await api(ts.url, owner.token).getNode(`${space}/jpin/a`), 200).body.content).toMatchObject({ メモ: 'よし' })
    // Still refused: a name starting with a digit or holding a space or a dash, with what is allowed.
    for (const bad of ['1番', 'a b', 'a-b']) {
      const res = await putSubscription(ts.url, owner.token, `${space}/jpbad`, { ...japanese(`${space}/jpin`), Reactions: { [bad]: { Command: 'patch', Target: '{event.path}' } } })
      expect([res.status, errorCode(res)]).toEqual([422, 'contextual_invalid_definition'])
      expect((res.body as { error: { message: string } }).error.message).toContain('letters and digits of any script and _')
    }
  })

  it('[CTX57] the same refusal over the sync socket as over HTTP: contextual_invalid_definition, nothing written', async () => {
    const { ts, owner, space } = env
    const sub = `${space}/sock`
    expectStatus(await putSubscription(ts.url, owner.token, sub, definition(`${space}/sockin`)), 201)
    const before = expectStatus(await api(ts.url, owner.token).getNode(sub), 200).body
    // Each edit from a fresh client: a client's doc keeps a refused edit, and its next update would build on it.
    const viaSocket = async (patch: JsonObject) => {
      const mux = await MuxClient.connect(ts.url, owner.token)
      try {
        expect((await mux.join(sub)).ok).toBe(true)
        return await mux.patch(sub, patch)
      } finally {
        await mux.close()
      }
    }
    // A reaction named with a space: refused by the compiler, on the socket as on HTTP.
    expect(await viaSocket({ Reactions: { 'a b': { Command: 'patch', Target: '{event.path}' } } })).toMatchObject({ ok: false, code: 'contextual_invalid_definition' })
    expect(await viaSocket({ Reactions: { fix: { Command: 'patch', Target: '{evnt.path}' } } })).toMatchObject({ ok: false, code: 'contextual_invalid_template' })
    const http = await api(ts.url, owner.token).patchNode(sub, { Reactions: { 'a b': { Command: 'patch', Target: '{event.path}' } } })
    expect(errorCode(http)).toBe('contextual_invalid_definition')
    // Japanese names over the socket: taken.
    expect((await viaSocket({ Operation: '仕分け' })).ok).toBe(true)
    const after = expectStatus(await api(ts.url, owner.token).getNode(sub), 200).body
    expect(after.content.Reactions).toEqual(before.content.Reactions)
    expect(after.content.Operation).toBe('仕分け')
  })

  it('[CTX58] typos are refused at write with a named code and the field; a prefix that does not exist yet is taken', async () => {
    const { ts, owner, space } = env
    const prefix = `${space}/tin`
    const base = definition(prefix)
    const reactions = base.Reactions as JsonObject
    const withReaction = (r: JsonObject): JsonObject => ({ ...base, Reactions: { ...reactions, bad: { Command: 'patch', ...r } } })
    const cases: Array<[string, JsonObject, string, string]> = [
      ['an unknown placeholder', withReaction({ Target: '{evnt.path}' }), 'contextual_invalid_template', 'Reactions.bad.Target holds {evnt.path}'],
      ['a parameter declared nowhere', withReaction({ Target: '{event.path}-{param.Team}' }), 'contextual_invalid_template', 'declares no parameter Team'],
      ["a reaction's own parameter", withReaction({ Target: '{event.path}/{param.Team}', Parameters: { Team: { Type: 'string' } } }), 'contextual_invalid_template', "one of the reaction's own Parameters"],
      ['a dot-dot segment', withReaction({ Target: '../etc' }), 'contextual_invalid_template', 'its segment ".." is not allowed'],
      ['a double slash', withReaction({ Target: '{event.path}//x' }), 'contextual_invalid_template', 'double /'],
      ['a lone brace', withReaction({ Target: '{event.path}/x}' }), 'contextual_invalid_template', 'opens or closes no placeholder'],
      ['a boolean parameter in a path', { ...withReaction({ Target: '{param.Flag}' }), Parameters: { Flag: { Type: 'boolean' } } }, 'contextual_invalid_template', 'only a string or number parameter'],
      ['a hydration typo', { ...base, Hydration: { source: { Get: '{event.pth}' } } }, 'contextual_invalid_template', 'Hydration.source.Get'],
      ['a misspelt node type', { ...base, Events: { ...(base.Events as JsonObject), NodeTypes: ['Documnt'] } }, 'contextual_unknown_node_type', 'Events.NodeTypes.0 "Documnt" is not a known node type: did you mean Document?'],
      ['a node type in the wrong case', { ...base, Events: { ...(base.Events as JsonObject), NodeTypes: ['document'] } }, 'contextual_unknown_node_type', 'did you mean Document?'],
      ['a prefix that is no path', { ...base, Events: { ...(base.Events as JsonObject), PathPrefix: 'a//b' } }, 'contextual_invalid_definition', 'Events.PathPrefix'],
    ]
    for (const [what, content, code, says] of cases) {
      const res = (await putSubscription(ts.url, owner.token, `${space}/typo`, content)) as ApiResponse<{ error?: { code: string; message: string } }>
      expect([what, res.status, errorCode(res)]).toEqual([what, 422, code])
      expect(res.body.error?.message, what).toContain(says)
    }
    expect((await api(ts.url, owner.token).getNode(`${space}/typo`)).status).toBe(404)
    // Taken: a prefix nothing stands at yet, a node type of one's own (modules bring theirs), a
    // parameter of the definition in a target.
    const fine = { ...base, Events: { ...(base.Events as JsonObject), PathPrefix: `${space}/not/yet`, NodeTypes: ['Invoice'] }, Parameters: { Team: { Type: 'string' } }, Reactions: { ...reactions, team: { Command: 'patch', Target: '{event.parent}/{param.Team}' } } }
    expectStatus(await putSubscription(ts.url, owner.token, `${space}/fine`, fine), 201)
  })
})
