import type { UserId } from './path.js'

/** Who performs an action. Engines act as `system`; requests act as their caller. */
export type Principal = { readonly kind: 'system' } | { readonly kind: 'user'; readonly userId: UserId }

export const SYSTEM: Principal = Object.freeze({ kind: 'system' })

export function userPrincipal(userId: UserId): Principal {
  return { kind: 'user', userId }
}

export function principalName(p: Principal): string {
  return p.kind === 'system' ? 'system' : p.userId
}

export function isSystem(p: Principal): p is Extract<Principal, { kind: 'system' }> {
  return p.kind === 'system'
}
