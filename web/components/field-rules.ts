import type { Permission } from '../../shared/enums.js'

/** Who may write a field (DESIGN.md "Field rules"); the server's `WriteRule`, without its zod schemas. */
type Rule = 'system' | 'admin' | 'owner' | Permission

interface TypeRules {
  /** The rule of a field the type does not name. */
  readonly defaultWrite: Rule
  readonly fields?: Readonly<Record<string, Rule>>
}

/**
 * The server's write rules per node type (shared/node-types.ts), zod-free so the browser can
 * read them: a field the caller may not write is shown, never offered as an input. A unit test
 * holds this table to `fieldRule` for every built-in type, so the two cannot drift apart.
 */
export const WRITE_RULES: Readonly<Record<string, TypeRules>> = {
  User: { defaultWrite: 'Update', fields: { Email: 'system' } },
  Membership: { defaultWrite: 'admin' },
  AccessAssignment: { defaultWrite: 'admin' },
  Invitation: { defaultWrite: 'admin' },
  EventSubscription: { defaultWrite: 'admin' },
  ActivityLog: {
    defaultWrite: 'Update',
    fields: {
      Status: 'system', Messages: 'system', Progress: 'system', Start: 'system', End: 'system', ReturnValue: 'system', Error: 'system',
      CreatedBy: 'system', StartedBy: 'system', Source: 'system', Language: 'system', CodePath: 'system', RequestedStatus: 'owner', Inputs: 'owner',
    },
  },
  Code: { defaultWrite: 'Update', fields: { LastActivityPath: 'system' } },
  CodeCheck: { defaultWrite: 'system' },
  Partition: { defaultWrite: 'admin' },
  Thread: {
    defaultWrite: 'Update',
    fields: {
      ExecutionStatus: 'system', Status: 'system', Disposition: 'system', Messages: 'system', UserMessageIds: 'system', IngestedMessageIds: 'system',
      PendingUserMessages: 'system', Posted: 'system', HasPending: 'system', ExecutionStartedAt: 'system', LastActivityAt: 'system', ParentPath: 'system', Round: 'system',
      Question: 'system', PendingApproval: 'system', ApprovalBy: 'system', AgentSetBy: 'system', AgentSince: 'system', ApprovalAnswer: 'Update', RequestedStatus: 'Thread', Agent: 'Update',
    },
  },
  ThreadMessage: { defaultWrite: 'Thread' },
  ContextualSubscription: { defaultWrite: 'Update', fields: { Hash: 'system' } },
}

/** The rule for one field; types this build does not name are written with Update. */
export function writeRuleOf(nodeType: string, key: string): Rule {
  const rules = Object.prototype.hasOwnProperty.call(WRITE_RULES, nodeType) ? WRITE_RULES[nodeType]! : null
  if (!rules) return 'Update'
  return rules.fields && Object.prototype.hasOwnProperty.call(rules.fields, key) ? rules.fields[key]! : rules.defaultWrite
}

/**
 * True when the caller may write `key` of a `nodeType` node: `perms` is the room's Joined mask
 * (null while unknown: offered, the server decides), `isOwner` says the node's owner field names
 * the caller (an ActivityLog's `CreatedBy`).
 */
export function mayWriteField(nodeType: string, key: string, perms: ReadonlySet<Permission> | null, isOwner = false): boolean {
  const rule = writeRuleOf(nodeType, key)
  switch (rule) {
    case 'system':
      return false
    case 'admin':
      return !perms || perms.has('ManageAccess')
    case 'owner':
      return isOwner || !perms || perms.has('Update')
    default:
      return !perms || perms.has(rule)
  }
}

/**
 * [WEB62] Fields a node type requires (its content schema in shared/node-types.ts refuses the
 * content without them), zod-free like WRITE_RULES and held to the schemas by a unit test: a
 * field listed here offers no ✕, which the server would refuse as invalid content.
 */
export const REQUIRED_FIELDS: Readonly<Record<string, readonly string[]>> = {
  AccessAssignment: ['Subject', 'Role'],
  CodeCheck: ['Status'],
  ThreadMessage: ['Role', 'Author', 'Text', 'CreatedAt'],
  ContextualSubscription: ['Operation', 'Events', 'Reactions'],
}

export function isRequiredField(nodeType: string, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(REQUIRED_FIELDS, nodeType) && REQUIRED_FIELDS[nodeType]!.includes(key)
}
