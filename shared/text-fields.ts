/**
 * Which string values of a node are text that merges character by character (a Y.Text in the
 * node's doc) and which stay plain values that a write replaces whole (docs/decisions/0008).
 *
 *  - Node types whose content is permissive (Document, Space, unknown types: any JSON object):
 *    every string, at any depth. What people type there is prose.
 *  - Typed node types: only the fields they declare as text (Code.Source, Code.Description).
 *    Their other strings are enum-like (Status, RequestedStatus, Role, TriggerType...): merging
 *    "Running" and "Cancelled" by character would make a value no schema accepts.
 *
 * zod-free on purpose: the browser imports it (node-types.ts holds the schemas and builds its
 * `textFields` from the same table; a unit test holds the typed list to `isPermissiveContent`).
 */

/** A field's place in the content, from the top-level key down. */
export type TextPolicy = (path: readonly string[]) => boolean

/** Builtin node types with a schema (not permissive), and the fields each declares as text. */
export const TYPED_TEXT_FIELDS: Readonly<Record<string, readonly string[]>> = {
  User: [],
  AccessAssignment: [],
  EventSubscription: [],
  ActivityLog: [],
  Code: ['Source', 'Description'],
  CodeCheck: [],
  Partition: [],
  Thread: [],
  ThreadMessage: ['Text'],
  ContextualSubscription: [],
}

const everyString: TextPolicy = () => true
const policies = new Map<string, TextPolicy>()

/** The text rule of a node type; types this build does not know are permissive. */
export function textPolicyFor(nodeType: string): TextPolicy {
  let policy = policies.get(nodeType)
  if (!policy) {
    const declared = Object.prototype.hasOwnProperty.call(TYPED_TEXT_FIELDS, nodeType) ? TYPED_TEXT_FIELDS[nodeType]! : null
    if (declared === null) policy = everyString
    else {
      const set = new Set(declared)
      policy = (path) => path.length === 1 && set.has(path[0]!)
    }
    policies.set(nodeType, policy)
  }
  return policy
}

/** True when the top-level field `key` of a `nodeType` node holds merging text when it is a string. */
export function isTextField(nodeType: string, key: string): boolean {
  return textPolicyFor(nodeType)([key])
}

/**
 * [STO5] True when `key` is a text field a typed node type declares (ThreadMessage.Text,
 * Code.Source): false for every field of a permissive type, whose strings all merge but whose
 * fields are not declared.
 */
export function isDeclaredTextField(nodeType: string, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(TYPED_TEXT_FIELDS, nodeType) && TYPED_TEXT_FIELDS[nodeType]!.includes(key)
}
