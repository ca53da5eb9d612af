import type { ContextualGrpcOptions, ContextualGrpcServer } from './grpc-server.js'
export { ContextualService, OUTCOME_RETENTION_MS, SETTLED_RETENTION_MS, type ContextualPeers, type ContextualServiceOptions, type OfferedReaction, type ReactionOutcome, type WorkItem } from './contextual-service.js'
export { compileDefinition, type CompiledDefinition, type CompiledReaction } from './definition.js'
export { contextualRoutes } from './routes.js'
export { contextualWriteRule } from './write-rule.js'
export { ConsumerRequest, ExtendRequest, FenceRequest, MineRequest, NackRequest, NextRequest, ReactRequest } from './contextual-service.js'
export { PROTO_FILE } from './proto-file.js'
export type { ContextualGrpcOptions, ContextualGrpcServer } from './grpc-server.js'

/** [PROD3] `@grpc/grpc-js` and its proto loader load only when GRPC_PORT is set. */
export async function startContextualGrpc(opts: ContextualGrpcOptions): Promise<ContextualGrpcServer> {
  const grpc = await import('./grpc-server.js')
  return grpc.startContextualGrpc(opts)
}
