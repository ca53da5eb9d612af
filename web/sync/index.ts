export { SyncClient, type Session, type SyncStatus, type SyncStatusKind, type SyncClientOptions } from './sync-client.js'
export { MuxConnection, type ConnectionStatus, type FinalClose } from './mux-connection.js'
export { NodeReplica, formatBytes, type PresenceUser, type ReplicaState, type RoomDenial, type TabMessage, type ChangeOrigin, type TextEditorBinding, type TextLike } from './node-replica.js'
export { mergeTextEdits } from './text-rebase.js'
