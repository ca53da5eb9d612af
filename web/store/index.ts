export { NodeStore, newNodeDoc, type LocalQuery } from './node-store.js'
export { WeftDb, dbNameFor, type IndexRow, type OutboxRow, type OpRow, type OutboxStatus, type UpdateRow } from './db.js'
export { liveStoreQuery } from './live-query.js'
export { groupRefused, refusedText, type RefusedGroup } from './refused.js'
