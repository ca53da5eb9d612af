/**
 * Persisted enums. They are stored by NAME; the number is part of the contract too and never
 * changes: new members are appended at the end (DESIGN.md, "Enums"). `test/unit/enums.test.ts`
 * pins every number.
 */
function enumTable<const T extends readonly string[]>(members: T) {
  const byName = Object.fromEntries(members.map((m, i) => [m, i])) as { readonly [K in T[number]]: number }
  return {
    members,
    number: byName,
    isMember(value: unknown): value is T[number] {
      return typeof value === 'string' && (members as readonly string[]).includes(value)
    },
    fromNumber(n: number): T[number] | undefined {
      return members[n]
    },
  }
}

export const EventTriggerType = enumTable(['NodeChange', 'Timer', 'NodeStatus'] as const)
export type EventTriggerType = (typeof EventTriggerType.members)[number]

export const EventContinuationType = enumTable([
  'GrantSpaceAccess',
  'PostThreadMessage',
  'AddToGroup',
  'DeliverToNode',
  'PublishSocialPost',
] as const)
export type EventContinuationType = (typeof EventContinuationType.members)[number]

export const EventSubscriptionStatus = enumTable(['Pending', 'Fired', 'Failed', 'Cancelled'] as const)
export type EventSubscriptionStatus = (typeof EventSubscriptionStatus.members)[number]

export const MeshChangeKind = enumTable(['Created', 'Updated', 'Deleted'] as const)
export type MeshChangeKind = (typeof MeshChangeKind.members)[number]

/** Ordered by severity: finishing takes the maximum of the current and the requested status. */
export const ActivityStatus = enumTable(['Running', 'Succeeded', 'Warning', 'Failed', 'Cancelled'] as const)
export type ActivityStatus = (typeof ActivityStatus.members)[number]

export const ThreadExecutionStatus = enumTable(['Idle', 'StartingExecution', 'Executing', 'Cancelled', 'Done'] as const)
export type ThreadExecutionStatus = (typeof ThreadExecutionStatus.members)[number]

export const Role = enumTable(['Viewer', 'Commenter', 'Editor', 'Admin'] as const)
export type Role = (typeof Role.members)[number]

export const Permission = enumTable([
  'Read',
  'Create',
  'Update',
  'Delete',
  'Comment',
  'Execute',
  'Thread',
  'Export',
  'ManageAccess',
] as const)
export type Permission = (typeof Permission.members)[number]
