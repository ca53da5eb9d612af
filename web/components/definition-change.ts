import { CONTEXTUAL_DEFINITION_FIELDS, createContextualClient } from '../../shared/index.js'
import { app } from '../app-context.js'

/** The path of the node page this field is on (its host across shadow roots), or null elsewhere. */
export function nodePathOf(el: Element): string | null {
  let n: Node | null = el
  while (n) {
    if (n instanceof HTMLElement && n.localName === 'weft-node-page') return (n as HTMLElement & { path?: string }).path ?? null
    n = n instanceof ShadowRoot ? n.host : n.parentNode
  }
  return null
}

/**
 * [WEB122] What saving a changed ContextualSubscription definition does to its workers, asked
 * before it is saved: a consumer is of one definition, so each running worker goes on as a new
 * consumer from its next pull, and what the earlier consumers hold (leased events, dead letters)
 * stays with them, marked on the status page as from an earlier definition. The counts are those
 * the person can see (theirs, or every consumer for an Admin); unknown, the warning is general.
 */
async function definitionChangeWarning(path: string): Promise<string> {
  let held = ''
  try {
    const answer = await createContextualClient({ baseUrl: location.origin, token: app().session.token }).consumers(path)
    // Those made for the definition held now (a server that does not mark them: every one listed).
    const current = answer.consumers.filter((c) => (c as { current?: boolean }).current !== false)
    const leased = current.reduce((n, c) => n + c.leased, 0)
    const dead = current.reduce((n, c) => n + c.dead, 0)
    if (current.length > 0) held = ` The ${current.length} current consumer${current.length === 1 ? '' : 's'} you can see hold ${leased} leased event${leased === 1 ? '' : 's'} and ${dead} dead letter${dead === 1 ? '' : 's'}: they stay with those consumers, shown on the status page as from an earlier definition, where an Admin re-drives or deletes them.`
  } catch {
    // The counts are a courtesy: the warning stands without them.
  }
  return `Save the changed definition of this subscription?\n\nRunning workers continue as new consumers of the changed definition from their next pull.${held || ' Leased events and dead letters stay with the earlier consumers, shown on the status page as from an earlier definition, where an Admin re-drives or deletes them.'}`
}

/**
 * [WEB122] [WEB134] Asks before a write of `key` on the node at `path` when it changes a
 * ContextualSubscription's definition (its JSON editor, its plain text field): true to go on.
 * Any other node or field goes on without a question.
 */
export async function confirmDefinitionChange(path: string | null, key: string): Promise<boolean> {
  if (!path || !CONTEXTUAL_DEFINITION_FIELDS.includes(key)) return true
  const row = await app().client.store.db.nodes.get(path)
  if (row?.nodeType !== 'ContextualSubscription') return true
  return confirm(await definitionChangeWarning(path))
}
