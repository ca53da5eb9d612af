import type { CommitAttachment } from './types.js'

/**
 * [CTX50] The fence of a reaction's command for a commit before its last: the same checks (admit,
 * the lease, the source row, no outcome yet), nothing recorded; `landed` is told to `attach`.
 */
export function stepOf(attach: CommitAttachment): CommitAttachment {
  return {
    attachment: attach.attachment ? { ...attach.attachment, fenceOnly: true } : null,
    ...(attach.admit ? { admit: attach.admit } : {}),
    onLanded: () => {
      attach.landed = true
      attach.onLanded?.()
    },
  }
}
