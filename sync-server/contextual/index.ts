export { ContextualService, type ContextualServiceOptions, type OfferedReaction, type ReactionOutcome, type WorkItem } from './contextual-service.js'
export { compileDefinition, type CompiledDefinition, type CompiledReaction } from './definition.js'
export { contextualRoutes } from './routes.js'
export { contextualWriteRule } from './write-rule.js'
