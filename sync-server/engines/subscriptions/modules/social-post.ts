import { SYSTEM, tryParseNodePath, type NodePath } from '../../../../shared/index.js'
import { hasPermission } from '../access.js'
import { ContinuationFailure, type ContinuationInput } from '../continuation-registry.js'
import type { SubscriptionModule } from '../module.js'

/**
 * PublishSocialPost: a module-claimed continuation. Writes a `Post` node under TargetPath at a
 * path derived from the subscription id (so a replay finds it and stops), after re-checking
 * that the requester may still create there.
 */
async function publishSocialPost(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const parent = tryParseNodePath(sub.TargetPath)
  if (!parent) throw new ContinuationFailure(`PublishSocialPost needs a valid TargetPath (got ${JSON.stringify(sub.TargetPath ?? null)}).`)
  if (sub.CreatedBy && sub.CreatedBy !== 'system') {
    if (!hasPermission(nodes, sub.CreatedBy, parent, 'Create')) {
      throw new ContinuationFailure(`${sub.CreatedBy} may no longer post in ${parent}, so the post was not published.`)
    }
  }
  const path = tryParseNodePath(`${parent}/post_${sub.Id}`) as NodePath | null
  if (!path) throw new ContinuationFailure(`Subscription id ${sub.Id} cannot name a post.`)
  await nodes.update(SYSTEM, path, (current) => {
    if (current) return undefined
    return {
      nodeType: 'Post',
      name: `Post ${sub.Id}`,
      content: {
        Text: sub.Text ?? '',
        Author: sub.CreatedBy ?? null,
        SubjectId: input.subjectId,
        SubscriptionId: sub.Id,
        PublishedAt: input.now.toISOString(),
      },
    }
  }, 'engine')
}

export const socialModule: SubscriptionModule = {
  name: 'social',
  continuations: { PublishSocialPost: publishSocialPost },
}
