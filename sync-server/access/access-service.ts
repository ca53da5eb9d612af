import { createHash } from 'node:crypto'
import { withheldFrom, type FeedWithhold } from '../storage/index.js'
import {
  ALL_PERMISSIONS,
  NO_PERMISSIONS,
  Role,
  isInTrash,
  isSystem,
  lastSegment,
  TRASH_SEGMENT,
  parentPath,
  permissionsOf,
  selfAndAncestors,
  topLevel,
  type MeshNode,
  type NodePath,
  type Permission,
  type PermissionSet,
  type Principal,
  type UserId,
  type PathRange,
} from '../../shared/index.js'

interface Assignment {
  path: NodePath
  role: Role
  denied: boolean
}

export const ACCESS_SEGMENT = '_Access'
/**
 * Admin/Partition/{name} itself, never below it ([ACT11]): a partition definition is a leaf, and
 * `Admin` defines no partition. A subtree rule here once let any user create Code nodes inside the
 * Admin partition (under Admin/Partition/{their home}) and route runs into Admin/Operations.
 */
const PARTITION_NODE = /^Admin\/Partition\/(?!Admin$)([^/]+)$/
/** What the Admins of {name} hold on its definition: enough to write a Partition (create, write and
 * delete need ManageAccess), nothing to create anything else there (no Create, no Execute). */
const PARTITION_PERMISSIONS: PermissionSet = new Set<Permission>(['Read', 'Update', 'Delete', 'ManageAccess'])
/** Admin/Operations and below ([ACT14]). */
const OPERATIONS_NODE = /^Admin\/Operations(?:\/|$)/
const OPERATION_PERMISSIONS = permissionsOf('Viewer')
/**
 * [MOVE5] What the Admins of `{top}` hold in `{top}/_Trash` and below: list, read, restore and
 * purge. Nobody else holds anything there, whatever assignments the trashed subtree carries.
 */
const TRASH_PERMISSIONS: PermissionSet = new Set<Permission>(['Read', 'Delete', 'ManageAccess'])
const CACHE_MAX = 50_000
const REGION_CACHE_MAX = 10_000
const OPERATIONS_ROOT = 'Admin/Operations'
const PARTITION_ROOT = 'Admin/Partition'

/** Bytewise order of ASCII path strings, as SQLite and PostgreSQL's "C" collation order them. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
const MEMBERSHIP_SUFFIX = '_Membership'

/**
 * The one access check for every transport and engine (DESIGN.md "Identity and access").
 *
 * Effective permissions of a user on a path:
 *  - `system` holds everything; a user is Admin of their home (`{userId}` and below).
 *  - Subjects are the user and every group they are a member of (`{group}/{userId}_Membership`).
 *  - [ACC1] For each subject, the CLOSEST assignment on the path or its ancestors counts; a
 *    Denied one gives nothing and blocks what that subject inherits from further up.
 *  - [ACC2] The result is the union over subjects.
 *  - [ACC3] A Denied assignment of the user themselves also blocks every role their groups
 *    inherit from above it.
 *
 * The assignment and membership indexes are a cache of durable nodes, updated synchronously as
 * writes are applied (before they are acknowledged), and rebuilt from storage at boot.
 */
export class AccessService {
  /** scope path → subject → assignment */
  private readonly assignments = new Map<NodePath, Map<string, Assignment>>()
  /** userId → group paths */
  private readonly memberships = new Map<string, Set<NodePath>>()
  /** [FEED5] Scopes holding at least one Denied assignment (few): what `deniedWithin` looks through. */
  private readonly deniedScopes = new Set<NodePath>()
  private readonly listeners = new Set<() => void>()
  /** Bumped on every change of an assignment or membership; caches key on it. */
  generation = 0
  /** userId + path → permissions, valid for the current generation (every write checks access). */
  private readonly cache = new Map<string, PermissionSet>()
  /** subject → scopes where it has an assignment: the roots of its readable regions ([QUERY1]). */
  private readonly scopesBySubject = new Map<string, Set<NodePath>>()
  /** userId → its readable regions, valid for one generation. */
  private readonly regionCache = new Map<string, { generation: number; regions: PathRange[] }>()
  /** userId → its capability revision, valid for one generation. */
  private readonly revisionCache = new Map<string, { generation: number; revision: string }>()

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Feed every AccessAssignment and Membership node at boot, and every change after. */
  observe(before: MeshNode | null, after: MeshNode | null): void {
    const node = after ?? before
    if (!node) return
    if (node.nodeType !== 'AccessAssignment' && node.nodeType !== 'Membership') return
    if (before) this.remove(before)
    if (after) this.add(after)
    this.generation++
    this.cache.clear()
    for (const l of this.listeners) l()
  }

  private add(node: MeshNode): void {
    if (node.nodeType === 'AccessAssignment') {
      const scope = assignmentScope(node.path)
      const subject = node.content.Subject
      const role = node.content.Role
      if (!scope || typeof subject !== 'string' || !Role.isMember(role)) return
      let bySubject = this.assignments.get(scope)
      if (!bySubject) this.assignments.set(scope, (bySubject = new Map()))
      bySubject.set(subject, { path: node.path, role, denied: node.content.Denied === true })
      if (node.content.Denied === true) this.deniedScopes.add(scope)
      let scopes = this.scopesBySubject.get(subject)
      if (!scopes) this.scopesBySubject.set(subject, (scopes = new Set()))
      scopes.add(scope)
    } else {
      const m = membershipOf(node.path)
      if (!m) return
      let groups = this.memberships.get(m.userId)
      if (!groups) this.memberships.set(m.userId, (groups = new Set()))
      groups.add(m.group)
    }
  }

  private remove(node: MeshNode): void {
    if (node.nodeType === 'AccessAssignment') {
      const scope = assignmentScope(node.path)
      const bySubject = scope && this.assignments.get(scope)
      if (!bySubject) return
      for (const [subject, a] of bySubject) {
        if (a.path !== node.path) continue
        bySubject.delete(subject)
        this.scopesBySubject.get(subject)?.delete(scope)
      }
      if (bySubject.size === 0) this.assignments.delete(scope)
      if (![...bySubject.values()].some((a) => a.denied)) this.deniedScopes.delete(scope)
    } else {
      const m = membershipOf(node.path)
      if (m) this.memberships.get(m.userId)?.delete(m.group)
    }
  }

  groupsOf(userId: string): NodePath[] {
    return [...(this.memberships.get(userId) ?? [])]
  }

  permissions(principal: Principal, path: NodePath): PermissionSet {
    if (isSystem(principal)) return ALL_PERMISSIONS
    return this.userPermissions(principal.userId, path)
  }

  userPermissions(userId: UserId | string, path: NodePath): PermissionSet {
    if (topLevel(path) === userId) return ALL_PERMISSIONS
    // [ACT11] A partition node Admin/Partition/{name} is administered by the Admins of {name}.
    const partition = PARTITION_NODE.exec(path)?.[1]
    if (partition && this.userPermissions(userId, partition as NodePath).has('ManageAccess')) return PARTITION_PERMISSIONS
    // [ACT14] The built-in operation templates are readable and executable by every user.
    if (OPERATIONS_NODE.test(path)) return OPERATION_PERMISSIONS
    if (isInTrash(path)) return this.userPermissions(userId, topLevel(path)).has('ManageAccess') ? TRASH_PERMISSIONS : NO_PERMISSIONS
    const key = `${userId}\u0000${path}`
    const hit = this.cache.get(key)
    if (hit) return hit
    const computed = this.computePermissions(userId, path)
    if (this.cache.size >= CACHE_MAX) this.cache.clear()
    this.cache.set(key, computed)
    return computed
  }

  private computePermissions(userId: string, path: NodePath): PermissionSet {
    const subjects = [userId, ...this.groupsOf(userId)]
    const resolved = new Set<string>()
    let result: Set<Permission> | null = null
    for (const scope of selfAndAncestors(path)) {
      const here = this.assignments.get(scope)
      if (!here) continue
      for (const subject of subjects) {
        if (resolved.has(subject)) continue
        const a = here.get(subject)
        if (!a) continue
        resolved.add(subject)
        if (a.denied) continue
        result ??= new Set()
        for (const p of permissionsOf(a.role)) result.add(p)
      }
      // [ACC3] A user's own Denied is a barrier: nothing inherited from further up counts.
      if (here.get(userId)?.denied) break
    }
    return result ?? NO_PERMISSIONS
  }

  has(principal: Principal, path: NodePath, permission: Permission): boolean {
    return this.permissions(principal, path).has(permission)
  }

  /**
   * [QUERY1] The paths the user may read, as sorted, disjoint half-open ranges `[from, to)` of
   * path strings: what a query scans, so rows the user may not read are never examined and can
   * neither fill a page nor move a cursor.
   *
   * Permissions are constant between roots: the user's home, Admin/Operations, every scope where
   * the user or one of their groups has an assignment, and `Admin/Partition/{name}` for the
   * top-level ones. A path gets the permissions of its deepest root (computePermissions only
   * looks at scopes holding one of the user's subjects, and every special rule of
   * userPermissions covers a root's whole subtree), so the regions are the pieces between
   * root boundaries whose governing root reads. A new rule in userPermissions needs its root
   * here (the property test in test/integration/query-oracle.test.ts checks the two agree).
   */
  readRegions(userId: string): PathRange[] {
    const hit = this.regionCache.get(userId)
    if (hit && hit.generation === this.generation) return hit.regions
    const roots = new Set<string>([userId, OPERATIONS_ROOT])
    for (const subject of [userId, ...this.groupsOf(userId)]) for (const scope of this.scopesBySubject.get(subject) ?? []) roots.add(scope)
    for (const root of [...roots]) if (!root.includes('/')) roots.add(`${PARTITION_ROOT}/${root}`)
    // [MOVE5] A trash is governed by its own rule, not by the space above it.
    for (const root of [...roots]) if (!root.includes('/') || isInTrash(root)) roots.add(`${topLevel(root as NodePath)}/${TRASH_SEGMENT}`)
    const readable = new Map<string, boolean>()
    for (const root of roots) readable.set(root, this.userPermissions(userId, root as NodePath).has('Read'))
    // [ACT11] A partition definition is a leaf: its Admins hold it, never anything below it.
    for (const root of roots) if (root.startsWith(`${PARTITION_ROOT}/`)) readable.set(`${root}/`, false)
    // Each root's subtree is [r, r,) plus [r/, r0): ',' sorts just below every path character
    // and '0' just after '/', so no path lies between r and r, (a bound PostgreSQL text can hold,
    // unlike NUL). Between two neighbouring boundaries the governing root cannot change.
    const bounds = [...new Set([...roots].flatMap((r) => [r, `${r},`, `${r}/`, `${r}0`]))].sort(compareStrings)
    const governing = (at: string): string | null => {
      if (readable.has(at)) return at
      for (let i = at.lastIndexOf('/'); i > 0; i = at.lastIndexOf('/', i - 1)) {
        const prefix = at.slice(0, i)
        if (readable.has(prefix)) return prefix
      }
      return null
    }
    const regions: PathRange[] = []
    for (let i = 0; i + 1 < bounds.length; i++) {
      const root = governing(bounds[i]!)
      if (root === null || !readable.get(root)) continue
      const last = regions[regions.length - 1]
      if (last && last.to === bounds[i]) last.to = bounds[i + 1]!
      else regions.push({ from: bounds[i]!, to: bounds[i + 1]! })
    }
    if (this.regionCache.size >= REGION_CACHE_MAX) this.regionCache.clear()
    this.regionCache.set(userId, { generation: this.generation, regions })
    return regions
  }

  /**
   * [CTX25] The user's capability revision: a digest of everything their permissions derive
   * from (their groups, and every assignment held by them or one of those groups: scope, role,
   * denied). Any grant, revocation, role change or membership change that touches the user gives
   * another revision; one elsewhere in the mesh does not. Derived from the durable nodes alone, so
   * every instance, and the same instance after a restart, computes the same revision.
   */
  capabilityRevision(userId: string): string {
    const hit = this.revisionCache.get(userId)
    if (hit && hit.generation === this.generation) return hit.revision
    const hash = createHash('sha256')
    for (const subject of [userId, ...this.groupsOf(userId).sort(compareStrings)]) {
      hash.update(`s\u0000${subject}\u0000`)
      for (const scope of [...(this.scopesBySubject.get(subject) ?? [])].sort(compareStrings)) {
        const a = this.assignments.get(scope)?.get(subject)
        if (a) hash.update(`a\u0000${scope}\u0000${a.role}\u0000${a.denied ? 1 : 0}\u0000`)
      }
    }
    const revision = hash.digest('base64url').slice(0, 22)
    if (this.revisionCache.size >= REGION_CACHE_MAX) this.revisionCache.clear()
    this.revisionCache.set(userId, { generation: this.generation, revision })
    return revision
  }

  /**
   * [FEED5] The Denied assignments standing at `path` and below: what a move, a trash or a delete
   * of that subtree takes away from the scopes they stand on.
   */
  deniedWithin(path: NodePath): FeedWithhold[] {
    const out: FeedWithhold[] = []
    const below = `${path}/`
    for (const scope of this.deniedScopes) {
      if (scope !== path && !scope.startsWith(below)) continue
      for (const [subject, a] of this.assignments.get(scope) ?? []) if (a.denied) out.push({ scope, subject, assignment: a.path })
    }
    return out
  }

  /** [FEED5] Whether `subjects` names the user or one of their groups. */
  namesUser(userId: string, subjects: readonly string[]): boolean {
    return withheldFrom(subjects, [userId, ...this.groupsOf(userId)])
  }

  /** Admin assignments (not denied) directly on a scope; a Space must always keep one. */
  adminsOf(scope: NodePath): string[] {
    const bySubject = this.assignments.get(scope)
    if (!bySubject) return []
    return [...bySubject.entries()].filter(([, a]) => a.role === 'Admin' && !a.denied).map(([s]) => s)
  }

  /** Subjects with a direct assignment on the scope. */
  assignmentsAt(scope: NodePath): { subject: string; role: Role; denied: boolean; path: NodePath }[] {
    return [...(this.assignments.get(scope) ?? new Map<string, Assignment>()).entries()].map(([subject, a]) => ({
      subject,
      role: a.role,
      denied: a.denied,
      path: a.path,
    }))
  }
}

/** The node types the access indexes hold (AccessService.observe). */
export const ACCESS_NODE_TYPES: readonly string[] = ['AccessAssignment', 'Membership']

export function isAccessType(nodeType: string): boolean {
  return ACCESS_NODE_TYPES.includes(nodeType)
}

/** The path segment that names a subject: a group path's `/` is written `.` ([ACC0]). */
export function assignmentLabel(subject: string): string {
  return `${subject.replaceAll('/', '.')}_Access`
}

/** `{scope}/_Access/{subject}_Access` → scope. */
export function assignmentScope(path: NodePath): NodePath | null {
  const parent = parentPath(path)
  if (!parent || lastSegment(parent) !== ACCESS_SEGMENT) return null
  return parentPath(parent)
}

/** `{group}/{userId}_Membership` → { group, userId }. */
export function membershipOf(path: NodePath): { group: NodePath; userId: string } | null {
  const seg = lastSegment(path)
  const group = parentPath(path)
  if (!group || !seg.endsWith(MEMBERSHIP_SUFFIX) || seg.length === MEMBERSHIP_SUFFIX.length) return null
  // [ACC9] A group is never a top-level path: those are user ids and spaces, and a "group"
  // named like a user would hand that user's roles to whoever its owner adds.
  if (!group.includes('/')) return null
  return { group, userId: seg.slice(0, -MEMBERSHIP_SUFFIX.length) }
}

/**
 * [FEED5] The Denied assignment that `before` was and `after` (the same path's next state; null:
 * gone) no longer is: deleted, no longer Denied, or naming another subject. Null when none ended
 * (or `before` was no assignment the access index holds).
 */
export function deniedEnded(before: MeshNode | null, after: MeshNode | null): FeedWithhold | null {
  const subject = standingDenied(before)
  if (subject === null || standingDenied(after) === subject) return null
  return { scope: assignmentScope(before!.path)!, subject, assignment: before!.path }
}

/**
 * [FEED8] The subject a Denied begins standing for with this change of an assignment node (created
 * Denied, patched to Denied, or its subject changed while Denied), or null.
 */
export function deniedBegun(before: MeshNode | null, after: MeshNode | null): string | null {
  const subject = standingDenied(after)
  return subject !== null && standingDenied(before) !== subject ? subject : null
}

/** The subject a node denies where it stands: an AccessAssignment at an assignment path, Denied, with a role. */
function standingDenied(node: MeshNode | null): string | null {
  if (node?.nodeType !== 'AccessAssignment' || node.content.Denied !== true) return null
  const subject = node.content.Subject
  if (!assignmentScope(node.path) || typeof subject !== 'string' || !Role.isMember(node.content.Role)) return null
  return subject
}
