import { Dexie, type Table } from 'dexie'
import type { JsonObject, MergePatch } from '../../shared/index.js'
import type { TextSplice } from '../sync/text-rebase.js'

/**
 * One IndexedDB database per signed-in user holds every node (y-indexeddb opens one database per
 * document; opening thousands of those is what makes a cold start slow).
 *
 *  - `updates`: the node's Yjs updates, appended as they happen and compacted into one row.
 *  - `nodes`: the local index (path, type, name, parent, updatedAt, pending count) so lists and
 *    search work offline without opening any document.
 *  - `outbox`: the client's intent — every merge patch it made that the server has not yet
 *    acknowledged, with the Yjs update it produced. Refused entries stay until the author
 *    discards them (DESIGN.md, "A refused update poisons the client's doc").
 *  - `ops`: node creations and deletions made while offline, replayed in order over HTTP.
 *  - `meta`: small key/value facts (e.g. the last change version seen).
 */
export interface UpdateRow {
  id?: number
  path: string
  update: Uint8Array
}

export interface IndexRow {
  path: string
  /** '' for a top-level node, so it stays indexable (IndexedDB does not index null). */
  parent: string
  nodeType: string
  name: string
  updatedAt: string
  version: number
  /** Outbox entries of this node not yet acknowledged (refused ones excluded). */
  pending: number
  /** Refused outbox entries waiting for the author. */
  refused: number
  /** Created locally and not yet on the server. */
  localOnly?: 0 | 1
  /**
   * A stand-in row, made by an edit to a node this device had no row for: its `nodeType` is a
   * guess (Document) until the server's row replaces it. Nothing may decide by that type
   * (which strings are text): a User taken for a Document had its Email "converted" to text,
   * which the server refuses (forbidden_field), an edit its author never made.
   */
  typeUnknown?: 1
  /**
   * When this device last learned the row from the server (`NodeStore.stamp`): a listing of its
   * parent asked before then does not forget it (the row of a child just created, which that
   * older listing could not hold).
   */
  seen?: number
  /**
   * [SYNC22] When the node at this path was created, as the server last told this device: another
   * value later means the node was deleted and another made at its path (decision 0011).
   */
  createdAt?: string
}

export type OutboxStatus = 'pending' | 'refused'

export interface OutboxRow {
  /** Also the `seq` of the Update frame that carries it, so an Ack names the entry. */
  id?: number
  path: string
  patch: MergePatch
  /**
   * [WEB53] For each text field the patch sets: the field as the edit found it, as a change of
   * the text the patch holds (the field as the edit left it; web/sync/text-rebase.ts `textBaseOf`).
   * A replay applies what the edit changed to the field as it is then. Absent in entries stored
   * before: those replay the whole field.
   */
  base?: Record<string, TextSplice>
  /** [SYNC22] The creation time of the node this edit was made on (its index row's), when known. */
  nodeCreatedAt?: string
  /** [SYNC22] Refused because that node was deleted and another made at its path. */
  nodeReplaced?: 1
  update: Uint8Array
  status: OutboxStatus
  code?: string
  message?: string
  /** Times this entry was replayed on a rebuilt doc after a dependent refusal. */
  replays?: number
  /**
   * [WEB53] The server refused these bytes (they are replayed): their structs, if the server holds
   * structs of those ids (another writer with this client id), are not this edit.
   */
  bytesRefused?: boolean
  at: string
}

/**
 * [SYNC19] A queued operation's failed replays that were no refusal (the network, a 5xx): it stays
 * queued and is tried again; these say how often it failed and how, for the person and the tests.
 */
export interface OpTries {
  tries?: number
  lastCode?: string
  lastMessage?: string
}

export type OpRow = (
  | {
      id?: number
      kind: 'create'
      path: string
      nodeType: string
      name: string
      at: string
      /**
       * A sealed creation: the node is made with this whole content in its one PUT and its
       * author never changes it after (a thread's user cell, composed offline: [THR1] lets a
       * person create their own cell, never edit it). Its local state is not in the outbox.
       */
      content?: JsonObject
    }
  | { id?: number; kind: 'delete'; path: string; at: string }
  /**
   * [WEB131] A rename made offline: `name` is shown on this device at once (its index row), `from`
   * is the name it had, put back if the server refuses the rename.
   */
  | { id?: number; kind: 'rename'; path: string; name: string; from: string; at: string }
) &
  OpTries &
  OpRefusal

/**
 * [SYNC24] A queued operation the server refused for good (a 4xx with its code): kept, not
 * replayed or counted as pending, until its author discards it; what it asked for (a name typed,
 * a deletion) stays readable to them.
 */
export interface OpRefusal {
  refusal?: { code: string; message: string }
}

export interface MetaRow {
  key: string
  value: JsonObject | string | number
}

export class WeftDb extends Dexie {
  updates!: Table<UpdateRow, number>
  nodes!: Table<IndexRow, string>
  outbox!: Table<OutboxRow, number>
  ops!: Table<OpRow, number>
  meta!: Table<MetaRow, string>

  constructor(name: string) {
    super(name)
    this.version(1).stores({
      updates: '++id, path',
      nodes: 'path, parent, [parent+name], nodeType, updatedAt, pending, refused',
      outbox: '++id, path, status, [path+status]',
      ops: '++id, path',
      meta: 'key',
    })
  }
}

export function dbNameFor(userId: string): string {
  return `weft-${userId}`
}
