export { NodeService, type NodeMetricsHooks, type NodeServiceOptions } from './node-service.js'
export type { RemoteChange } from './remote-apply.js'
export { EarlyUpdate } from './loaded-node.js'
export { MOVE_ATTEMPTS, MoveService } from './move-service.js'
export { MAX_CURSOR_LENGTH, isSealedCursor } from './query-cursor.js'
export { writeFence } from './fence.js'
export { personNames } from './person-name.js'
export { stepOf } from './commit-step.js'
export { checkFieldRules, ownerOf } from './write-policy.js'
export type {
  AppendOptions,
  ChangeOrigin,
  CommitAttachment,
  HttpNodeApi,
  LiveChange,
  NodeApi,
  NodeDraft,
  RoomConnection,
  SyncNodeApi,
  SyncRoom,
  UpdateFn,
  WriteRuleHook,
} from './types.js'
