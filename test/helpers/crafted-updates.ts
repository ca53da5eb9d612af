import * as Y from 'yjs'
import * as encoding from 'lib0/encoding'
import { CONTENT_MAP } from '../../shared/index.js'

/**
 * Hand-made Yjs updates (v1) for attacks on the gate: structs are written exactly as given (a
 * struct's clock is its section's start plus the lengths before it), with any origin, parent,
 * key and content, and any delete set.
 */
export interface CraftedSection {
  client: number
  clock: number
  structs: (Y.Item | Y.GC | Y.Skip)[]
}

export function encodeCrafted(sections: CraftedSection[], ds: { client: number; clock: number; len: number }[] = []): Uint8Array {
  const enc = new Y.UpdateEncoderV1()
  encoding.writeVarUint(enc.restEncoder, sections.length)
  for (const sec of sections) {
    encoding.writeVarUint(enc.restEncoder, sec.structs.length)
    enc.writeClient(sec.client)
    encoding.writeVarUint(enc.restEncoder, sec.clock)
    for (const s of sec.structs) {
      // An item with neither neighbours nor a parent cannot be encoded at all: give it the root.
      if (s instanceof Y.Item && !s.origin && !s.rightOrigin && !s.parent) s.parent = CONTENT_MAP as unknown as Y.ID
      s.write(enc, 0)
    }
  }
  const byClient = new Map<number, { clock: number; len: number }[]>()
  for (const r of ds) byClient.set(r.client, [...(byClient.get(r.client) ?? []), r])
  encoding.writeVarUint(enc.restEncoder, byClient.size)
  for (const [client, ranges] of byClient) {
    encoding.writeVarUint(enc.restEncoder, client)
    encoding.writeVarUint(enc.restEncoder, ranges.length)
    for (const r of ranges) {
      enc.writeDsClock(r.clock)
      enc.writeDsLen(r.len)
    }
  }
  return enc.toUint8Array()
}

/** An item that names its place itself: `content[key]` (origin and right origin null). */
export function rootEntry(client: number, clock: number, key: string, values: unknown[]): Y.Item {
  const item = new Y.Item(Y.createID(client, clock), null, null, null, null, CONTENT_MAP as unknown as Y.ID, key, new Y.ContentAny(values))
  return item
}

/** An item placed after `origin` (its parent is the origin's, as Yjs reads it). */
export function itemAfter(client: number, clock: number, origin: Y.ID | null, content: Y.Item['content'], rightOrigin: Y.ID | null = null): Y.Item {
  return new Y.Item(Y.createID(client, clock), null, origin, null, rightOrigin, null, null, content)
}

/**
 * The finding-1 shape: a struct of `client` starting at `clock` (below the server's state for
 * that client, so its first part is known) that names `content[key]` as its own place and carries
 * `values.length` values; the server holds the first `known` of them already.
 */
export function partlyKnownEntry(client: number, clock: number, key: string, values: unknown[]): Uint8Array {
  return encodeCrafted([{ client, clock, structs: [rootEntry(client, clock, key, values)] }])
}

/** A y-protocols sync `update` message carrying `update` (what a /sync client sends). */
export function syncUpdateMessage(update: Uint8Array): Uint8Array {
  const e = encoding.createEncoder()
  encoding.writeVarUint(e, 0) // messageSync
  encoding.writeVarUint(e, 2) // messageYjsUpdate
  encoding.writeVarUint8Array(e, update)
  return encoding.toUint8Array(e)
}
