import { background } from '../sync/background.js'

/**
 * Elements the first screen does not need. A cold start renders one node's page and its list;
 * everything else is fetched the first time its element is rendered (`need(tag)` beside the
 * template that renders it) and upgrades in place: Lit keeps the properties a template set on
 * the element before its definition arrived. What this keeps out of the entry chunk that every
 * cold start parses and runs: zod (the subscription page's typed client), the run, code and
 * thread pages, the home, the other pages and the sign-in form.
 */
const LOADERS = {
  'weft-auth-page': () => import('./auth-page.js'),
  'weft-home-page': () => import('./home-page.js'),
  'weft-trash-page': () => import('./trash-page.js'),
  'weft-contextual-page': () => import('./contextual-page.js'),
  'weft-operations-page': () => import('./operations-page.js'),
  'weft-operator-page': () => import('./operator-page.js'),
  'weft-thread-page': () => import('./thread-page.js'),
  'weft-members-panel': () => import('./members-panel.js'),
  'weft-group-invite-dialog': () => import('./group-invite-dialog.js'),
  'weft-code-page': () => import('./code-page.js'),
  'weft-activity-panel': () => import('./activity-panel.js'),
  'weft-activity-strip': () => import('./activity-strip.js'),
} satisfies Record<string, () => Promise<unknown>>

export type LazyTag = keyof typeof LOADERS

const asked = new Set<LazyTag>()

/** Starts loading the modules of these elements (once each; a failed load is tried again on the next call). */
export function need(...tags: LazyTag[]): void {
  for (const tag of tags) {
    if (asked.has(tag) || customElements.get(tag)) continue
    asked.add(tag)
    background(
      LOADERS[tag]().catch((e: unknown) => {
        asked.delete(tag)
        throw e
      }),
    )
  }
}
