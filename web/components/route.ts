/** Hash routes (`#/n/{path}`) work from the cached app shell with no server round trip. */
export function nodeHref(path: string): string {
  return `#/n/${path}`
}

export function pathFromHash(hash: string): string | null {
  const m = /^#\/n\/(.+)$/.exec(hash)
  return m ? decodeURIComponent(m[1]!) : null
}

/** The list of every refused edit on this device (the status bar's count opens it). */
export const REFUSED_HREF = '#/refused'

/** [WEB14] The landing page after sign-in: spaces, recent nodes, runs, pending invites. */
export const HOME_HREF = '#/'

/** [WEB18] The operations the caller can run: the built-in ones and shared Code operations. */
export const OPERATIONS_HREF = '#/operations'

/** [OPS10] The operator's page (operators only: figures, dead letters, stuck runs, lagging consumers). */
export const OPERATOR_HREF = '#/operator'

/** [MOVE6] A space's trash (its Admins restore from it). */
export function trashHref(space: string): string {
  return `#/trash/${space}`
}

export function trashFromHash(hash: string): string | null {
  const m = /^#\/trash\/([^/]+)$/.exec(hash)
  return m ? decodeURIComponent(m[1]!) : null
}

/** [CTX49] The signed-in person's contextual consumers over every subscription. */
export const MY_CONSUMERS_HREF = '#/consumers'

/** [CTX38] A contextual subscription's status page: its consumers, dead letters, lag. */
export function contextualHref(subscription: string): string {
  return `#/contextual/${subscription}`
}

export function contextualFromHash(hash: string): string | null {
  const m = /^#\/contextual\/(.+)$/.exec(hash)
  return m ? decodeURIComponent(m[1]!) : null
}
