import { randomBytes } from 'node:crypto'
import {
  ADMIN_PARTITION,
  SYSTEM,
  TRASH_SEGMENT,
  WeftError,
  isDescendantOrSelf,
  isReservedSegment,
  isSystem,
  keptPlace,
  lastSegment,
  nodeTypeDef,
  parentPath,
  pathSegments,
  principalName,
  topLevel,
  type MeshNode,
  type NodePath,
  type Principal,
  type WriteRule,
} from '../../shared/index.js'
import { elsewhereRefusal, type TrashEntry } from '../storage/index.js'
import type { NodeService } from './node-service.js'
import { personNames } from './person-name.js'

/** [MOVE2] Nodes one move carries at most: a bigger subtree is moved in parts. */
export const MAX_MOVE_NODES = 10_000

/** [SCALE21] Tries of one move whose subtree other instances change meanwhile. */
export const MOVE_ATTEMPTS = 3

/**
 * [MOVE1]–[MOVE7] Move, trash and restore: the rules (who may, what may go where), on top of the
 * node service's one atomic relocation. Every refusal has a code and a reason a person can act on.
 */
export class MoveService {
  constructor(private readonly nodes: NodeService) {}

  /**
   * [SCALE21] A move refused because another instance changed its subtree (or a tombstone where it
   * goes) since it was worked out: made again, checks and all, once this instance has caught up;
   * at most MOVE_ATTEMPTS times in all (a subtree people keep editing through other instances
   * is then refused, and the person tries again).
   */
  private async again<T>(from: NodePath, op: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await op()
      } catch (err) {
        const refusal = elsewhereRefusal(err)
        if (refusal?.path !== from || refusal.retry === 'gone' || attempt >= MOVE_ATTEMPTS) throw err
        await this.nodes.catchUp()
      }
    }
  }

  /** [MOVE1] [MOVE2] Moves `from` (with its subtree) to `to`; answers the new path. */
  move(principal: Principal, from: NodePath, to: NodePath): Promise<{ path: NodePath; moved: number }> {
    return this.again(from, () => this.moveOnce(principal, from, to))
  }

  private async moveOnce(principal: Principal, from: NodePath, to: NodePath): Promise<{ path: NodePath; moved: number }> {
    const root = await this.readable(principal, from)
    this.movable(from, 'move')
    if (to === from) throw new WeftError('invalid_move', `${from} is already there.`)
    if (isDescendantOrSelf(to, from)) throw new WeftError('invalid_move', `${from} cannot move into itself (${to} is inside it).`)
    this.placeable(to)
    const parent = parentPath(to)!
    // The destination: readable parent (else the refusal an unreadable node gets), then rights.
    if (!this.nodes.permissions(principal, parent).has('Read')) throw new WeftError('forbidden', `${principalName(principal)} cannot read ${parent}.`)
    if (!(await this.nodes.get(SYSTEM, parent))) throw new WeftError('not_found', `Cannot move to ${to}: ${parent} does not exist.`)
    this.require(principal, from, nodeTypeDef(root.nodeType).delete, `move ${from} away (it needs the right to delete it there)`)
    this.require(principal, to, nodeTypeDef(root.nodeType).create, `create a ${root.nodeType} under ${parent}`)
    if (await this.nodes.get(SYSTEM, to)) throw new WeftError('conflict', `Something is already at ${to}; choose another name or place.`)
    const subtree = await this.subtree(principal, root)
    await this.nodes.relocate(principal, from, to, { redirect: true })
    return { path: to, moved: subtree.length }
  }

  /** [MOVE5] Moves the node and its subtree to `{top}/_Trash/{id}`; an Admin of `{top}` restores it. */
  trash(principal: Principal, path: NodePath): Promise<{ trashPath: NodePath; originalPath: NodePath }> {
    return this.again(path, () => this.trashOnce(principal, path))
  }

  private async trashOnce(principal: Principal, path: NodePath): Promise<{ trashPath: NodePath; originalPath: NodePath }> {
    const root = await this.readable(principal, path)
    this.movable(path, 'trash')
    this.require(principal, path, nodeTypeDef(root.nodeType).delete, `delete ${path}`)
    await this.subtree(principal, root)
    const trashPath = `${topLevel(path)}/${TRASH_SEGMENT}/${randomBytes(6).toString('hex')}` as NodePath
    await this.nodes.relocate(principal, path, trashPath, { redirect: false, trash: { originalPath: path, deletedBy: principalName(principal) } })
    return { trashPath, originalPath: path }
  }

  /** [MOVE6] The trash of a top-level node: its Admins only. */
  async listTrash(principal: Principal, top: NodePath): Promise<TrashEntry[]> {
    if (top.includes('/')) throw new WeftError('invalid_request', 'A trash belongs to a top-level node (a space or a home).')
    if (!isSystem(principal) && !this.nodes.permissions(principal, top).has('ManageAccess')) {
      throw new WeftError('forbidden', `Only the Admins of ${top} see its trash.`)
    }
    const entries = await this.nodes.listTrash(top)
    // Who deleted it, by name ([MOVE6]): the Admin reading the trash shares the space with them.
    const names = await personNames(this.nodes, entries.map((e) => e.deletedBy))
    return entries.map((e) => ({ ...e, deletedByName: names.get(e.deletedBy) ?? null }))
  }

  /** [MOVE6] Puts a trashed subtree back where it was, if that place is still free. */
  restore(principal: Principal, trashPath: NodePath): Promise<{ path: NodePath }> {
    return this.again(trashPath, () => this.restoreOnce(principal, trashPath))
  }

  private async restoreOnce(principal: Principal, trashPath: NodePath): Promise<{ path: NodePath }> {
    const segments = pathSegments(trashPath)
    if (segments.length !== 3 || segments[1] !== TRASH_SEGMENT) throw new WeftError('invalid_request', `${trashPath} is not a trash entry ({space}/_Trash/{id}).`)
    const entry = (await this.listTrash(principal, segments[0] as NodePath)).find((e) => e.path === trashPath)
    if (!entry) throw new WeftError('not_found', `Nothing in the trash at ${trashPath}.`)
    const to = entry.originalPath
    const parent = parentPath(to)
    if (parent && !(await this.nodes.get(SYSTEM, parent))) {
      throw new WeftError('conflict', `${entry.name} cannot go back: the place it was in (${parent}) no longer exists. Restore that first, or move it elsewhere.`)
    }
    if (await this.nodes.get(SYSTEM, to)) throw new WeftError('conflict', `${entry.name} cannot go back: something else now stands at ${to}. Rename or move that first.`)
    await this.nodes.relocate(principal, trashPath, to, { redirect: false, restore: true })
    return { path: to }
  }

  /** [MOVE6] Purges (for good) every trash entry deleted before `before`; answers how many. */
  async purgeExpiredTrash(before: string): Promise<number> {
    let purged = 0
    for (;;) {
      const paths = await this.nodes.expiredTrash(before, 100)
      for (const path of paths) await this.nodes.delete(SYSTEM, path, 'system')
      purged += paths.length
      if (paths.length < 100) return purged
    }
  }

  private async readable(principal: Principal, path: NodePath): Promise<MeshNode> {
    const node = await this.nodes.get(principal, path)
    if (!node) throw new WeftError('not_found', `No node at ${path}.`)
    return node
  }

  /** Places that never move (shared/move-rules.ts, the rule the app offers by): the top level, the Admin partition, the trash, reserved children. */
  private movable(path: NodePath, what: 'move' | 'trash'): void {
    const kept = keptPlace(path)
    switch (kept) {
      case null:
        return
      case 'top':
        throw new WeftError('invalid_move', what === 'move' ? `${path} is a space or a home: it keeps its place (rename it instead).` : `${path} is a space or a home: it cannot go to a trash (an Admin deletes a space).`)
      case 'admin':
        throw new WeftError('invalid_move', `Nodes of the Admin partition keep their place (${path}).`)
      case 'trash':
        throw new WeftError('invalid_move', `${path} is in the trash: restore it first.`)
      case 'system':
        throw new WeftError('invalid_move', `${path} is a system child (its segment starts with _); it moves with its parent only.`)
      default:
        kept satisfies never
    }
  }

  private placeable(to: NodePath): void {
    if (!to.includes('/')) throw new WeftError('invalid_move', `Only spaces and homes live at the top level; choose a parent for ${lastSegment(to)}.`)
    if (topLevel(to) === ADMIN_PARTITION) throw new WeftError('invalid_move', 'Nothing moves into the Admin partition.')
    if (pathSegments(to).some(isReservedSegment)) throw new WeftError('invalid_move', `${to} is a reserved place (a segment starts with _).`)
  }

  private require(principal: Principal, path: NodePath, rule: WriteRule, what: string): void {
    if (isSystem(principal)) return
    const perms = this.nodes.permissions(principal, path)
    const ok = rule !== 'system' && perms.has(rule === 'admin' ? 'ManageAccess' : rule === 'owner' ? 'Update' : rule)
    if (!ok) throw new WeftError('forbidden', `${principalName(principal)} may not ${what}.`)
  }

  /**
   * [MOVE4] The subtree the move carries, all of it readable by the mover, none of it a Group
   * (access assignments name groups by path) nor a run or a thread still working.
   */
  private async subtree(principal: Principal, root: MeshNode): Promise<MeshNode[]> {
    const out: MeshNode[] = [root]
    for await (const node of this.nodes.scanSubtree(root.path)) {
      out.push(node)
      if (out.length > MAX_MOVE_NODES) throw new WeftError('invalid_move', `${root.path} holds more than ${MAX_MOVE_NODES} nodes; move its parts one by one.`)
    }
    for (const node of out) {
      if (!isSystem(principal) && !this.nodes.permissions(principal, node.path).has('Read')) {
        throw new WeftError('forbidden', `${root.path} holds nodes you cannot read; only someone who can read all of it may move it.`)
      }
      if (node.nodeType === 'Group') throw new WeftError('invalid_move', `${root.path} holds the group ${node.name}: access assignments name groups by their place, so a group keeps it.`)
      if (isWorking(node)) throw new WeftError('conflict', `${node.name} (${node.path}) is still running; cancel it or wait until it ends, then move.`)
    }
    return out
  }
}

/** A run or a thread that is working (or asked to start): it writes to its path as it goes. */
function isWorking(node: MeshNode): boolean {
  const c = node.content
  if (node.nodeType === 'ActivityLog') return c.Status === 'Running' || ((c.Status === undefined || c.Status === null) && c.RequestedStatus === 'Running')
  if (node.nodeType === 'Thread') return c.Status === 'StartingExecution' || c.Status === 'Executing'
  return false
}
