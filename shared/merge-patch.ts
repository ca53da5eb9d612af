import * as Y from 'yjs'
import { simpleDiffString } from 'lib0/diff'
import { uint32 } from 'lib0/random'
import { WeftError } from './errors.js'
import type { TextPolicy } from './text-fields.js'
import { isJsonObject, jsonEqual, type JsonObject, type JsonValue } from './json.js'
import { storableText, unstorableTextReason } from './storable-text.js'

/**
 * RFC 7396 JSON merge patch, and its mapping onto a Y.Doc.
 *
 * Document layout: the node's content is the root map `content`. JSON objects are nested
 * Y.Maps, so two writers patching different fields (at any depth) both survive. Arrays and
 * scalars are stored as plain values: RFC 7396 replaces them whole, and so do we. Strings the
 * node type's text policy names (shared/text-fields.ts) are Y.Text: a patch that replaces one
 * is applied as the minimal diff of the text, so two people typing in one field both keep
 * their words (docs/decisions/0008-text-fields.md).
 */
export const CONTENT_MAP = 'content'

export type MergePatch = JsonObject

/**
 * JSON.parse makes `__proto__` an ordinary member; plain `obj[key]` would read or replace the
 * prototype instead. These two keep such a member a field like any other.
 */
function getMember(obj: JsonObject, key: string): JsonValue | undefined {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined
}

function setMember(obj: JsonObject, key: string, value: JsonValue): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true })
  else obj[key] = value
}

/** Reference RFC 7396 on plain JSON; used for validation before a patch touches a doc. */
export function applyMergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue {
  if (!isJsonObject(patch)) return patch
  const result: JsonObject = isJsonObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key]
    else setMember(result, key, applyMergePatch(getMember(result, key), value))
  }
  return result
}

/**
 * How deep client JSON may nest (a top-level scalar field is depth 1). Deeper input is refused
 * with `invalid_patch` / `invalid_content` before anything recursive touches it: a patch 1,500
 * levels deep must be a clear 400, never a stack overflow half-way through a Yjs transaction.
 */
export const DEFAULT_MAX_JSON_DEPTH = 64

/** Rejects anything JSON.parse could not have produced (undefined, NaN, functions, class instances), or nested past `maxDepth`. */
export function assertMergePatch(patch: unknown, maxDepth = DEFAULT_MAX_JSON_DEPTH, text = true): asserts patch is MergePatch {
  if (!isJsonObject(patch)) {
    throw new WeftError('invalid_patch', 'A merge patch of a node\'s content must be a JSON object.')
  }
  checkJsonValue(patch, maxDepth, 'invalid_patch', text)
}

/**
 * [STO10] The text a write brings: `next` (checked as JSON already) is refused for the first text
 * or field name no storage holds where it differs from `before` at the same place (arrays compared
 * by index, so an append keeps every earlier item). What a node held before the rule (SQLite
 * stored NULs and half emoji as written) does not lock it against writes that keep it; the same
 * text moved or added elsewhere is refused as new.
 */
export function assertNewText(before: JsonValue | undefined, next: JsonObject, code: 'invalid_patch' | 'invalid_content'): void {
  const bad = findNewText(before, next)
  if (bad) throw new WeftError(code, badMessage(bad, 0))
}

function findNewText(before: unknown, next: unknown): Bad | null {
  if (before === next) return null
  if (typeof next === 'string') return storableText(next) ? null : { reason: 'text', at: [], text: next }
  if (Array.isArray(next)) {
    const old = Array.isArray(before) ? before : undefined
    for (let i = 0; i < next.length; i++) {
      const bad = findNewText(old?.[i], next[i])
      if (bad) {
        bad.at.push(i)
        return bad
      }
    }
    return null
  }
  if (next !== null && typeof next === 'object') {
    const old = isJsonObject(before) ? before : undefined
    for (const k in next) {
      if (!Object.prototype.hasOwnProperty.call(next, k)) continue
      const had = old !== undefined && Object.prototype.hasOwnProperty.call(old, k)
      if (!had && !storableText(k)) return { reason: 'key', at: [], text: k }
      const bad = findNewText(had ? old[k] : undefined, (next as Record<string, unknown>)[k])
      if (bad) {
        bad.at.push(k)
        return bad
      }
    }
  }
  return null
}

/**
 * The same check for whole content (create, replace): `invalid_content`. `text: false` leaves the
 * text alone: a replace checks the text of the fields it changes only (a field stored before
 * [STO10] does not lock the node against every later write).
 */
export function assertJsonContent(content: unknown, maxDepth = DEFAULT_MAX_JSON_DEPTH, text = true): asserts content is JsonObject {
  if (!isJsonObject(content)) throw new WeftError('invalid_content', 'Node content must be a JSON object.')
  checkJsonValue(content, maxDepth, 'invalid_content', text)
}

function isPlainScalar(v: unknown, text: boolean): boolean {
  return v === null || (typeof v === 'string' && (!text || storableText(v))) || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))
}

/**
 * Throws naming the first value that is not JSON, or that nests past `maxDepth`. Recursion is
 * bounded by `maxDepth`. The value's location is put together only on the way back up from a
 * value refused: every write runs this, and building `content.Messages[41]` for each item of a
 * log's append was most of what the check allocated.
 */
function checkJsonValue(v: unknown, maxDepth: number, code: 'invalid_patch' | 'invalid_content', text = true): void {
  const bad = findBad(v, 0, maxDepth, code === 'invalid_content', text)
  if (bad) throw new WeftError(code, badMessage(bad, maxDepth))
}

function badMessage(bad: Bad, maxDepth: number): string {
  let at = 'content'
  for (let i = bad.at.length - 1; i >= 0; i--) {
    const step = bad.at[i]!
    at += typeof step === 'number' ? `[${step}]` : `.${step}`
  }
  return (
    bad.reason === 'number' ? `Non-finite number at ${at}.`
    : bad.reason === 'deep' ? `The value at ${at} nests deeper than ${maxDepth} levels; flatten it.`
    : bad.reason === 'text' ? `The text at ${at} holds ${unstorableTextReason(bad.text ?? '')}, which cannot be stored; remove it.`
    : bad.reason === 'key' ? `A field name in ${at} holds ${unstorableTextReason(bad.text ?? '')}, which cannot be stored; rename the field.`
    : `Value at ${at} is not JSON.`
  )
}

/** The first value refused: why, and where (innermost step first). */
interface Bad {
  reason: 'number' | 'deep' | 'not_json' | 'text' | 'key'
  at: (string | number)[]
  text?: string
}

function findBad(v: unknown, depth: number, maxDepth: number, wholeContent: boolean, text: boolean): Bad | null {
  if (isPlainScalar(v, text)) return null
  if (typeof v === 'number') return { reason: 'number', at: [] }
  if (typeof v === 'string') return { reason: 'text', at: [], text: v }
  if (depth >= maxDepth) return { reason: 'deep', at: [] }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (isPlainScalar(v[i], text)) continue
      const bad = findBad(v[i], depth + 1, maxDepth, wholeContent, text)
      if (bad) {
        bad.at.push(i)
        return bad
      }
    }
    return null
  }
  if (isJsonObject(v) && Object.getPrototypeOf(v) === Object.prototype) {
    for (const k in v) {
      if (!Object.prototype.hasOwnProperty.call(v, k)) continue
      if (text && !storableText(k)) return { reason: 'key', at: [], text: k }
      if (isPlainScalar(v[k], text)) continue
      // Whole content drops an undefined member, as JSON does; a patch has no such reading.
      if (v[k] === undefined && wholeContent) continue
      const bad = findBad(v[k], depth + 1, maxDepth, wholeContent, text)
      if (bad) {
        bad.at.push(k)
        return bad
      }
    }
    return null
  }
  return { reason: 'not_json', at: [] }
}

/** The smallest merge patch that turns `from` into `to` (both objects). */
export function diffToMergePatch(from: JsonObject, to: JsonObject): MergePatch {
  const patch: MergePatch = {}
  for (const key of Object.keys(from)) {
    if (!Object.prototype.hasOwnProperty.call(to, key)) setMember(patch, key, null)
  }
  for (const [key, value] of Object.entries(to)) {
    const before = getMember(from, key)
    if (jsonEqual(before, value)) continue
    if (isJsonObject(value) && isJsonObject(before) && Object.keys(value).length > 0) {
      setMember(patch, key, diffToMergePatch(before, value))
    } else if (isJsonObject(value) && Object.keys(value).length === 0 && isJsonObject(before)) {
      // An empty object cannot be expressed as a merge of an object: delete every key instead.
      setMember(patch, key, Object.fromEntries(Object.keys(before).map((k) => [k, null])))
    } else {
      setMember(patch, key, value)
    }
  }
  return patch
}

function toYValue(value: JsonValue, at: readonly string[] | null, isText: TextPolicy | null): unknown {
  if (isJsonObject(value)) {
    const map = new Y.Map<unknown>()
    for (const [k, v] of Object.entries(value)) map.set(k, toYValue(v, at && at.concat(k), isText))
    return map
  }
  if (typeof value === 'string' && isText && at && isText(at)) return new Y.Text(value)
  return value
}

/**
 * Turns `text` into `value` with the smallest edit that keeps a common prefix and suffix: an
 * edit in one sentence then touches only that sentence, and a concurrent edit elsewhere in
 * the text survives. lib0's diff steps back from a split surrogate pair.
 */
export function applyTextDiff(text: Y.Text, value: string): void {
  const current = text.toString()
  if (current === value) return
  const d = simpleDiffString(current, value)
  if (d.remove > 0) text.delete(d.index, d.remove)
  if (d.insert.length > 0) text.insert(d.index, d.insert)
}

/**
 * `at` is the key path of `map` from the content root, tracked only when a text policy is given.
 * Without a policy (server writes that do not know the node type), an existing Y.Text is still
 * edited as text, and new strings are plain values.
 */
function patchMap(map: Y.Map<unknown>, patch: JsonObject, at: readonly string[] | null, isText: TextPolicy | null): void {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      if (map.has(key)) map.delete(key)
      continue
    }
    const current = map.get(key)
    const here = at && at.concat(key)
    if (isJsonObject(value)) {
      if (current instanceof Y.Map) patchMap(current, value, here, isText)
      else map.set(key, toYValue(applyMergePatch(undefined, value) as JsonValue, here, isText))
      continue
    }
    if (typeof value === 'string') {
      if (current instanceof Y.Text) {
        applyTextDiff(current, value)
        continue
      }
      // A plain string of a text field (written before text merged, or by a writer without the
      // policy) becomes a Y.Text on its first write: existing nodes migrate as they are edited.
      if (isText && here && isText(here)) {
        if (current !== value) map.set(key, new Y.Text(value))
        continue
      }
    }
    // A shared type (a log's Y.Array) holding the same JSON is left alone too: set again, it would be
    // a write of a field the caller's check never saw change, and would drop a concurrent append.
    if (current !== undefined && jsonEqual(current instanceof Y.AbstractType ? yToJson(current) : (current as JsonValue), value)) continue
    map.set(key, value)
  }
}

/**
 * Who checks the text of a write's values ([STO10]): these functions; the caller, which checked
 * the text the write brings against the stored content (`assertNewText`); or nobody, for content
 * read back from storage (a node stored before the rule is loaded as it is).
 */
export type TextCheck = 'checked here' | 'checked by the caller' | 'as stored'

/**
 * Applies an RFC 7396 patch to the doc's content as ONE Yjs transaction. `isText` (the node
 * type's `textPolicyFor`) decides which new strings become Y.Text; the JSON read back is the
 * same either way.
 */
export function applyPatchToDoc(doc: Y.Doc, patch: MergePatch, origin: unknown = null, isText: TextPolicy | null = null, text: TextCheck = 'checked here'): void {
  assertMergePatch(patch, DEFAULT_MAX_JSON_DEPTH, text === 'checked here')
  doc.transact(() => patchMap(doc.getMap(CONTENT_MAP), patch, isText ? [] : null, isText), origin)
}

/**
 * What `applyPatchToDoc` would make of `content`, on plain JSON: the same checks and the same
 * merge, for a node whose doc is not built (server engines' writes).
 */
export function applyPatchToJson(content: JsonObject, patch: MergePatch, text: TextCheck = 'checked here'): JsonObject {
  assertMergePatch(patch, DEFAULT_MAX_JSON_DEPTH, text === 'checked here')
  return applyMergePatch(content, patch) as JsonObject
}

/**
 * Replaces the whole content (PUT, create): the doc ends holding exactly `content`, `null`
 * members included. A merge patch cannot say "set this member to null" (RFC 7396 reads null as
 * delete), so this is not `applyPatchToDoc(diffToMergePatch(...))`: it walks both sides, and
 * unchanged members keep their Yjs items (a concurrent edit elsewhere survives).
 */
export function replaceDocContent(doc: Y.Doc, content: JsonObject, origin: unknown = null, isText: TextPolicy | null = null, text: TextCheck = 'checked here'): void {
  assertJsonContent(content, DEFAULT_MAX_JSON_DEPTH, text === 'checked here')
  doc.transact(() => setMap(doc.getMap(CONTENT_MAP), content, isText ? [] : null, isText), origin)
}

/**
 * [BAK4] [TOMB1] Writes `content` forward over whatever the doc holds (a node's older history, a
 * tombstone): one system transaction under a client id that neither the doc nor `avoid` (ids
 * bound to someone) has ever written under, so no client's copy holds any of its items.
 */
export function replaceDocContentForward(doc: Y.Doc, content: JsonObject, isText: TextPolicy, avoid: ReadonlySet<number> = new Set()): void {
  while (doc.store.clients.has(doc.clientID) || avoid.has(doc.clientID)) doc.clientID = uint32()
  replaceDocContent(doc, content, 'system', isText)
}

/** What `replaceDocContent` makes of the doc, on plain JSON: a copy of `content`, nulls kept. */
export function replaceJsonContent(content: JsonObject, text: TextCheck = 'checked here'): JsonObject {
  assertJsonContent(content, DEFAULT_MAX_JSON_DEPTH, text === 'checked here')
  return copyJson(content) as JsonObject
}

/** A deep copy as JSON would make it (an undefined member is left out, as JSON.stringify does). */
function copyJson(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(copyJson)
  if (!isJsonObject(value)) return value
  const out: JsonObject = {}
  for (const [k, v] of Object.entries(value)) if (v !== undefined) setMember(out, k, copyJson(v))
  return out
}

/** Makes `map` hold exactly `value` (nulls kept), touching only the members that differ. */
/**
 * Sets each of `fields` whole, as a replace would (`null` members kept), and leaves every other
 * field as it is: for a writer that holds a value with null members (a script's return value),
 * which a merge patch would strip. One Yjs transaction.
 */
export function setDocFields(doc: Y.Doc, fields: JsonObject, origin: unknown = null, isText: TextPolicy | null = null, text: TextCheck = 'checked here'): void {
  assertJsonContent(fields, DEFAULT_MAX_JSON_DEPTH, text === 'checked here')
  doc.transact(() => setMembers(doc.getMap(CONTENT_MAP), fields, isText ? [] : null, isText), origin)
}

function setMap(map: Y.Map<unknown>, value: JsonObject, at: readonly string[] | null, isText: TextPolicy | null): void {
  for (const key of [...map.keys()]) {
    if (getMember(value, key) === undefined) map.delete(key)
  }
  setMembers(map, value, at, isText)
}

/** Sets `value`'s members on `map` (null members kept); members `value` does not name stay. */
function setMembers(map: Y.Map<unknown>, value: JsonObject, at: readonly string[] | null, isText: TextPolicy | null): void {
  for (const [key, next] of Object.entries(value)) {
    if (next === undefined) continue
    const current = map.get(key)
    const here = at && at.concat(key)
    if (isJsonObject(next)) {
      if (current instanceof Y.Map) setMap(current, next, here, isText)
      else map.set(key, toYValue(copyJson(next), here, isText))
      continue
    }
    if (typeof next === 'string') {
      if (current instanceof Y.Text) {
        applyTextDiff(current, next)
        continue
      }
      if (isText && here && isText(here)) {
        if (current !== next) map.set(key, new Y.Text(next))
        continue
      }
    }
    // `has`: an absent member and a member holding null differ here.
    if (map.has(key) && jsonEqual(current instanceof Y.AbstractType ? yToJson(current) : (current as JsonValue), next)) continue
    map.set(key, copyJson(next))
  }
}

function yToJson(value: unknown): JsonValue {
  if (value instanceof Y.Map) {
    const out: JsonObject = {}
    value.forEach((v, k) => {
      setMember(out, k, yToJson(v))
    })
    return out
  }
  if (value instanceof Y.Array) return value.toArray().map(yToJson)
  if (value instanceof Y.Text) return value.toString()
  if (value instanceof Y.AbstractType) return value.toJSON() as JsonValue
  return value as JsonValue
}

export function docToJson(doc: Y.Doc): JsonObject {
  return yToJson(doc.getMap(CONTENT_MAP)) as JsonObject
}

/** The JSON of one top-level field of the doc's content; undefined when absent. */
export function fieldToJson(doc: Y.Doc, field: string): JsonValue | undefined {
  const map = doc.getMap(CONTENT_MAP)
  return map.has(field) ? yToJson(map.get(field)) : undefined
}

/**
 * `content` with the given top-level fields read again from the doc: what a Yjs update that
 * touched only those fields made of it, without walking the rest of a big node.
 */
export function withFieldsFromDoc(content: JsonObject, doc: Y.Doc, fields: Iterable<string>): JsonObject {
  const next: JsonObject = { ...content }
  for (const field of fields) {
    const value = fieldToJson(doc, field)
    if (value === undefined) delete next[field]
    else setMember(next, field, value)
  }
  return next
}

/**
 * Top-level text fields still stored as plain strings (written before text merged, or by a
 * writer without the policy), as the patch that names them with their current values.
 */
export function plainTextFields(doc: Y.Doc, isText: TextPolicy): MergePatch {
  const out: MergePatch = {}
  doc.getMap(CONTENT_MAP).forEach((v, k) => {
    if (typeof v === 'string' && isText([k])) setMember(out, k, v)
  })
  return out
}

/** Turns the plain strings `patch` names into Y.Text with the same value, as one transaction. */
export function convertToText(doc: Y.Doc, patch: MergePatch, origin: unknown = null): void {
  doc.transact(() => {
    const map = doc.getMap(CONTENT_MAP)
    for (const [k, v] of Object.entries(patch)) {
      if (typeof v === 'string' && map.get(k) === v) map.set(k, new Y.Text(v))
    }
  }, origin)
}

/**
 * The content's top-level field names in a stable order: the order in which each field was
 * first set, read from the Yjs structure itself (the first item of the key's chain of
 * overwrites), so every replica, and every reload, lists them the same way. A local Y.Map
 * iterates in the order it happened to receive keys, which differs between replicas.
 */
export function contentFieldOrder(doc: Y.Doc): string[] {
  const map = doc.getMap(CONTENT_MAP)
  const keyed: { key: string; clock: number; client: number }[] = []
  for (const [key, item] of map._map) {
    if (item.deleted) continue
    let first: Y.Item = item
    while (first.left && first.left.parentSub === key) first = first.left
    keyed.push({ key, clock: first.id.clock, client: first.id.client })
  }
  keyed.sort((a, b) => a.clock - b.clock || a.client - b.client)
  return keyed.map((k) => k.key)
}
