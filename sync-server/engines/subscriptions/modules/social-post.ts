import { SYSTEM, tryParseNodePath, type NodePath } from '../../../../shared/index.js'
import { ContinuationFailure, type ContinuationInput } from '../continuation-registry.js'
import type { SubscriptionModule } from '../module.js'
import { recheckRequesters, requesterOf } from '../requester.js'

/**
 * PublishSocialPost: a module-claimed continuation. Writes a `Post` node under TargetPath at a
 * path derived from the subscription id (so a replay finds it and stops), after re-checking
 * that the requester may still create there.
 */
async function publishSocialPost(input: ContinuationInput): Promise<void> {
  const { nodes, subscription: sub } = input
  const parent = tryParseNodePath(sub.TargetPath)
  if (!parent) throw new ContinuationFailure(`PublishSocialPost needs a valid TargetPath (got ${JSON.stringify(sub.TargetPath ?? null)}).`)
  recheckRequesters(nodes, input.node, parent, 'Create', (by) => `${by} may no longer post in ${parent}, so the post was not published.`)
  const path = tryParseNodePath(`${parent}/post_${sub.Id}`) as NodePath | null
  if (!path) throw new ContinuationFailure(`Subscription id ${sub.Id} cannot name a post.`)
  await nodes.update(SYSTEM, path, (current) => {
    if (current) return undefined
    return {
      nodeType: 'Post',
      name: `Post ${sub.Id}`,
      content: {
        Text: sub.Text ?? '',
        Author: requesterOf(input.node),
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
