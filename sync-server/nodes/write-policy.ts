import {
  ADMIN_PARTITION,
  WeftError,
  fieldRule,
  isReservedSegment,
  isSystem,
  jsonEqual,
  lastSegment,
  nodeTypeDef,
  parentPath,
  partitionPlace,
  principalName,
  type JsonObject,
  type MeshNode,
  type NodePath,
  type Permission,
  type PermissionSet,
  type Principal,
  type WriteRule,
} from '../../shared/index.js'
import { ACCESS_SEGMENT, assignmentLabel, assignmentScope } from '../access/index.js'
import type { ChangeOrigin, WriteRuleHook } from './types.js'

/**
 * The write policy: what a write may do, decided from what it changes and what its writer holds.
 * Pure functions (no storage, no memory of their own); the caller passes the permissions it
 * looked up. The one stateful part is the registry of per-type rules engines add (WriteRules).
 */

/** Whether a principal holding `perms` at a path meets a node type's create/delete rule. */
export function allowsRule(principal: Principal, perms: () => PermissionSet, rule: WriteRule): boolean {
  if (isSystem(principal)) return true
  if (rule === 'system') return false
  // `owner` names a node's user; creating or deleting one needs Update.
  return perms().has(permissionOf(rule))
}

/** The permission a write rule other than `system` asks for (`owner`: a node's owner, or Update). */
function permissionOf(rule: Exclude<WriteRule, 'system'>): Permission {
  return rule === 'admin' ? 'ManageAccess' : rule === 'owner' ? 'Update' : rule
}

/** Whether a field's write rule admits the principal (a node's owner, under the `owner` rule, without Update). */
function admitsField(principal: Principal, perms: PermissionSet, rule: WriteRule, owner?: string): boolean {
  if (rule === 'owner' && owner !== undefined && principal.kind === 'user' && principal.userId === owner) return true
  return rule !== 'system' && perms.has(permissionOf(rule))
}

/** [ACC7] The one field-rule check: patch, replace, Yjs update and create alike. */
export function checkFieldRules(principal: Principal, perms: PermissionSet, nodeType: string, path: NodePath, fields: Iterable<string>, owner?: string): void {
  for (const field of fields) {
    const rule = fieldRule(nodeType, field)
    if (!admitsField(principal, perms, rule, owner)) {
      if (!perms.has('Update') && rule !== 'system') {
        throw new WeftError('forbidden', `${principalName(principal)} may not change ${path} (no Update permission).`)
      }
      const who = rule === 'system' ? 'only the system' : rule === 'admin' ? 'Admins' : rule === 'owner' ? 'its owner and holders of Update' : `holders of ${rule}`
      throw new WeftError('forbidden_field', `Field ${field} of a ${nodeType} is written by ${who}; your change to ${path} was not applied.`)
    }
  }
}

/**
 * A write that changes nothing is still a write: it is answered as done only to a principal who
 * could have written something it names (a field whose rule admits them; nothing named: Update).
 * A Viewer's PUT of the content as it stands, or an empty patch, is refused as her change would
 * be; an Editor naming only a system field at its value is refused as its change would be.
 */
export function checkNoopWrite(principal: Principal, perms: PermissionSet, nodeType: string, path: NodePath, fields: readonly string[], owner?: string): void {
  if (isSystem(principal)) return
  if (fields.length === 0 ? perms.has('Update') : fields.some((f) => admitsField(principal, perms, fieldRule(nodeType, f), owner))) return
  checkFieldRules(principal, perms, nodeType, path, fields, owner)
  throw new WeftError('forbidden', `${principalName(principal)} may not change ${path} (no Update permission).`)
}

/**
 * A person's replace keeps what she cannot write: a field of the node that her content leaves out
 * and whose rule does not admit her (a run's Status, a Code node's LastActivityPath, a thread's
 * round fields) stays as it is. She could not remove it, so leaving it out cannot mean that; a PUT
 * of the fields she edits is not refused for the ones she never saw (it was `forbidden_field`).
 */
export function keepUnwritable(principal: Principal, permissions: () => PermissionSet, before: MeshNode, content: JsonObject): JsonObject {
  if (isSystem(principal)) return content
  const perms = permissions()
  const owner = ownerOf(before)
  let out = content
  for (const [field, value] of Object.entries(before.content)) {
    if (Object.hasOwn(content, field) || admitsField(principal, perms, fieldRule(before.nodeType, field), owner)) continue
    if (out === content) out = { ...content }
    Object.defineProperty(out, field, { value, writable: true, enumerable: true, configurable: true })
  }
  return out
}

/** The user a node's `owner` rule admits (its type's ownerField), if any. */
export function ownerOf(node: MeshNode): string | undefined {
  const field = nodeTypeDef(node.nodeType).ownerField
  const owner = field === undefined ? undefined : node.content[field]
  return typeof owner === 'string' ? owner : undefined
}

/** Structural rules of reserved places. */
export function checkPlacement(principal: Principal, path: NodePath, nodeType: string): void {
  const parent = parentPath(path)
  const inAccess = parent !== null && lastSegment(parent) === ACCESS_SEGMENT
  if (inAccess !== (nodeType === 'AccessAssignment')) {
    throw new WeftError('invalid_path', `An AccessAssignment lives at {scope}/_Access/{subject}_Access and nothing else does (${path}).`)
  }
  if (nodeType === 'Membership') {
    const group = parentPath(path)
    if (!lastSegment(path).endsWith('_Membership') || !group || !group.includes('/')) {
      throw new WeftError('invalid_path', `A Membership lives at {group}/{userId}_Membership under a Group inside a space (${path}).`)
    }
  }
  if (!isSystem(principal) && isReservedSegment(lastSegment(path))) {
    throw new WeftError('invalid_path', `Segments starting with _ are reserved for system children (${path}).`)
  }
  // [ACT11] Admin/Partition/{name} holds a Partition and nothing else, and nothing below it.
  const place = partitionPlace(path)
  if (place && 'refused' in place) throw new WeftError('invalid_path', place.refused)
  if ((place !== null) !== (nodeType === 'Partition')) {
    throw new WeftError('invalid_path', `A Partition lives at Admin/Partition/{name} and nothing else does (${path} would be a ${nodeType}).`)
  }
}

/**
 * Invariants across nodes: an assignment's Subject is its path's; a Space keeps one Admin.
 * `adminsOf` names the subjects holding Admin on a top-level scope now.
 */
export function checkInvariants(before: MeshNode | null, after: MeshNode | null, cascading: boolean, adminsOf: (scope: NodePath) => readonly string[]): void {
  if (after?.nodeType === 'AccessAssignment') {
    const subject = after.content.Subject
    // [ACC0] The path names the subject: one assignment per subject and scope, never two.
    if (typeof subject !== 'string' || lastSegment(after.path) !== assignmentLabel(subject)) {
      throw new WeftError('invalid_content', `The Subject of ${after.path} must be the subject its name gives (${lastSegment(after.path)}).`)
    }
  }
  // The Admin area holds the server's operations and who operates it: deleting it (one click of
  // an operator's "Delete space…") took the operator's page from every operator at once.
  if (before?.path === ADMIN_PARTITION && !after) {
    throw new WeftError('forbidden', 'Admin is the server’s own area (its operations and who operates the server): it cannot be deleted.')
  }
  const node = before ?? after
  if (!node || node.nodeType !== 'AccessAssignment' || cascading) return
  const scope = assignmentScope(node.path)
  if (!scope || scope.includes('/')) return
  const wasAdmin = before && before.content.Role === 'Admin' && before.content.Denied !== true
  const isAdmin = after && after.content.Role === 'Admin' && after.content.Denied !== true
  if (!wasAdmin || isAdmin) return
  const subject = before.content.Subject
  const remaining = adminsOf(scope).filter((s) => s !== subject)
  if (remaining.length === 0) {
    throw new WeftError('last_admin', `${scope} must keep at least one Admin; grant Admin to someone else first.`)
  }
}

/** The top-level fields whose value differs between `a` and `b` (a member holding null differs from an absent one). */
export function changedFields(a: JsonObject, b: JsonObject): string[] {
  const has = (o: JsonObject, k: string) => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined
  return Object.keys({ ...a, ...b }).filter((k) => has(a, k) !== has(b, k) || !jsonEqual(a[k], b[k]))
}

/**
 * [DOC1] Whether a create builds the node's doc at once. A client's new node is likely opened
 * soon, and then needs no catch-up; a server engine's (a grant, a claim) most likely never is.
 */
export function buildsDocOnCreate(origin: ChangeOrigin): boolean {
  switch (origin) {
    case 'http':
    case 'sync':
    case 'mux':
      return true
    case 'engine':
    case 'system':
      return false
    default:
      return origin satisfies never
  }
}

/**
 * The per-type write rules engines register (NodeApi.registerWriteRule): one per node type. The
 * node service runs a type's rule on every user write of that type, on every transport.
 */
export class WriteRules {
  private readonly rules = new Map<string, WriteRuleHook>()

  register(nodeType: string, rule: WriteRuleHook): void {
    if (this.rules.has(nodeType)) throw new Error(`A write rule for ${nodeType} is already registered.`)
    this.rules.set(nodeType, rule)
  }

  has(nodeType: string): boolean {
    return this.rules.has(nodeType)
  }

  /** The type's rule for a user's write: refuses it (throws), or names system fields to add. */
  fields(principal: Principal, nodeType: string, path: NodePath, before: MeshNode | null, after: JsonObject, origin: ChangeOrigin): JsonObject | undefined {
    if (isSystem(principal)) return undefined
    const rule = this.rules.get(nodeType)
    if (!rule) return undefined
    const added = rule({ principal, path, before, after, origin })
    return added && Object.keys(added).length > 0 ? added : undefined
  }
}
