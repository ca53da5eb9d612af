import { Permission, type Role } from './enums.js'

/** DESIGN.md role table. */
export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  Viewer: ['Read', 'Execute'],
  Commenter: ['Read', 'Comment'],
  Editor: ['Read', 'Create', 'Update', 'Comment', 'Execute', 'Thread', 'Export'],
  Admin: Permission.members,
}

export type PermissionSet = ReadonlySet<Permission>

export const NO_PERMISSIONS: PermissionSet = new Set()
export const ALL_PERMISSIONS: PermissionSet = new Set(Permission.members)

export function permissionsOf(role: Role): PermissionSet {
  return new Set(ROLE_PERMISSIONS[role])
}

/** Bitmask by Permission number, for the wire (`Joined` frame). */
export function permissionMask(set: PermissionSet): number {
  let mask = 0
  for (const p of set) mask |= 1 << Permission.number[p]
  return mask
}

export function permissionsFromMask(mask: number): PermissionSet {
  return new Set(Permission.members.filter((p) => (mask & (1 << Permission.number[p])) !== 0))
}
