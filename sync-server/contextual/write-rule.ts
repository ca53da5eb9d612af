import type { WriteRuleHook } from '../nodes/index.js'
import { compileDefinition } from './definition.js'

/**
 * [CTX1] [CTX2] Every user write of a ContextualSubscription, on every transport, compiles the
 * definition: a broken bound refuses the write with its named error (nothing is written), and
 * system writes the compiled identity (`Hash`) with it.
 */
export function contextualWriteRule(): WriteRuleHook {
  return ({ after }) => ({ Hash: compileDefinition(after, { write: true }).hash })
}
