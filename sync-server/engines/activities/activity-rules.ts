import { WeftError, jsonEqual, parseNodePath, type JsonObject } from '../../../shared/index.js'
import type { WriteRuleHook } from '../../nodes/index.js'
import { request, type PermissionSource } from '../kit/index.js'

function isDraft(content: JsonObject): boolean {
  return content.Status === undefined || content.Status === null
}

/**
 * [ACT17] The ActivityLog's write rule, for every user write on every transport (HTTP PATCH and
 * PUT, a Yjs update on /sync or /mux, a script's Mesh call):
 *
 *  - A start request (RequestedStatus becomes `Running` on a draft) is a request to act: its
 *    writer needs Execute on the activity's Code node NOW (`forbidden` otherwise, nothing
 *    written), and becomes the run's `StartedBy`, written by system in the same write. The run
 *    acts as them (kit/authority.ts), never as the draft's creator when someone else starts it.
 *  - Once a start is requested, the draft's Inputs are fixed (`conflict`), as they are once it
 *    has a Status ([ACT10]): whoever starts a run starts it on the inputs they saw, and nobody can
 *    swap them between the request and the claim.
 */
export function activityWriteRule(access: PermissionSource): WriteRuleHook {
  return ({ principal, before, after }) => {
    const prior = before?.content ?? {}
    // [ACT10] A run reads its Inputs as it starts: once it has a Status they are history, and a
    // change would only show inputs the run never saw.
    if (before && !isDraft(prior) && !jsonEqual(prior.Inputs ?? null, after.Inputs ?? null)) {
      throw new WeftError('conflict', `The run ${before.path} has started and read its Inputs then; they can no longer change. Run it again with the new inputs.`)
    }
    if (!isDraft(prior)) return undefined
    if (before && prior.RequestedStatus === 'Running' && !jsonEqual(prior.Inputs ?? null, after.Inputs ?? null)) {
      throw new WeftError('conflict', `The run ${before.path} has been asked to start with its Inputs as they are; cancel the request to change them.`)
    }
    if (after.RequestedStatus !== 'Running' || prior.RequestedStatus === 'Running' || !isDraft(after)) return undefined
    // CodePath is system-only: what the activity names, not something this write chose. An
    // activity naming no Code node starts nothing (the run ends Failed saying so).
    if (after.CodePath !== undefined) request(access, principal, 'Execute', parseNodePath(after.CodePath))
    return { StartedBy: principal.userId }
  }
}
