import { SYSTEM, type JsonValue, type MergePatch, type MeshNode, type NodePath } from '../../../shared/index.js'
import type { ChangeOrigin, NodeApi, NodeDraft } from '../../nodes/index.js'

/**
 * The claim (STYLE.md "Engines"; issue 17): the re-check and the write that takes the work are ONE
 * `update`, serialised with every other write to the node, so of any number of racing claimers
 * exactly one finds `when` true and writes. Never "check, return the node unchanged, then write
 * in a second call": between the two another claimer can pass the same check.
 *
 * `when(current)` is the condition (the node may be null: absent); `write(current)` the state the
 * claim leaves, written in the same stretch. The answer says whether THIS call claimed, and the
 * node as it is after the call (claimed or not).
 */

export interface Claimed {
  claimed: boolean
  node: MeshNode | null
}

export async function claim(nodes: Pick<NodeApi, 'update'>, path: NodePath, spec: { when: (current: MeshNode | null) => boolean; write: (current: MeshNode | null) => NodeDraft | null; origin?: ChangeOrigin }): Promise<Claimed> {
  let claimed = false
  const node = await nodes.update(
    SYSTEM,
    path,
    (cur) => {
      claimed = false
      if (!spec.when(cur)) return undefined
      claimed = true
      return spec.write(cur)
    },
    spec.origin ?? 'engine',
  )
  return { claimed, node }
}

/**
 * A claim that also appends to an array field (an activity's Messages) in the same transaction:
 * `when` re-checks, `patch` the other fields it sets (undefined: it does not claim after all). The lines are written only when it claims,
 * so racing claimers append them exactly once.
 */
export async function claimAppend(
  nodes: Pick<NodeApi, 'append'>,
  path: NodePath,
  field: string,
  items: readonly JsonValue[],
  spec: { when: (current: MeshNode) => boolean; patch: (current: MeshNode) => MergePatch | undefined; origin?: ChangeOrigin },
): Promise<Claimed> {
  let claimed = false
  const node = await nodes.append(SYSTEM, path, field, items, spec.origin ?? 'engine', {
    patch: (cur) => {
      claimed = false
      if (!spec.when(cur)) return undefined
      const patch = spec.patch(cur)
      claimed = patch !== undefined
      return patch
    },
  })
  return { claimed, node }
}
