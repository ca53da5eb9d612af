import { describe, expect, it } from 'vitest'
import {
  ActivityStatus,
  EventContinuationType,
  EventSubscriptionStatus,
  EventTriggerType,
  MeshChangeKind,
  ThreadExecutionStatus,
} from '../../shared/index.js'

/**
 * DESIGN.md "Enums": persisted by name, numbers are stable, new members are appended. This
 * table is the contract: a failing row means a persisted number changed. Append, never edit.
 */
const TABLE = {
  EventTriggerType: [EventTriggerType, { NodeChange: 0, Timer: 1, NodeStatus: 2 }],
  EventContinuationType: [
    EventContinuationType,
    { GrantSpaceAccess: 0, PostThreadMessage: 1, AddToGroup: 2, DeliverToNode: 3, PublishSocialPost: 4 },
  ],
  EventSubscriptionStatus: [EventSubscriptionStatus, { Pending: 0, Fired: 1, Failed: 2, Cancelled: 3 }],
  MeshChangeKind: [MeshChangeKind, { Created: 0, Updated: 1, Deleted: 2 }],
  ActivityStatus: [ActivityStatus, { Running: 0, Succeeded: 1, Warning: 2, Failed: 3, Cancelled: 4 }],
  ThreadExecutionStatus: [
    ThreadExecutionStatus,
    { Idle: 0, StartingExecution: 1, Executing: 2, Cancelled: 3, Done: 4 },
  ],
} as const

interface EnumTable {
  members: readonly string[]
  number: Readonly<Record<string, number>>
  isMember(value: unknown): boolean
  fromNumber(n: number): string | undefined
}

describe('persisted enums keep their numbers', () => {
  for (const [name, [table, expected]] of Object.entries(TABLE) as unknown as [string, [EnumTable, Record<string, number>]][]) {
    it(`${name}: ${JSON.stringify(expected)}`, () => {
      expect({ ...table.number }).toEqual(expected)
      expect(table.members).toEqual(Object.keys(expected))
      for (const [member, n] of Object.entries(expected)) {
        expect(table.fromNumber(n)).toBe(member)
        expect(table.isMember(member)).toBe(true)
      }
      expect(table.fromNumber(table.members.length)).toBeUndefined()
      expect(table.fromNumber(-1)).toBeUndefined()
      // Names are case-sensitive and only strings are members.
      expect(table.isMember(table.members[0]!.toLowerCase())).toBe(false)
      expect(table.isMember(0)).toBe(false)
      expect(table.isMember(undefined)).toBe(false)
    })
  }

  it('ActivityStatus is ordered by severity: finishing takes the maximum', () => {
    const n = ActivityStatus.number
    expect(n.Running < n.Succeeded && n.Succeeded < n.Warning && n.Warning < n.Failed && n.Failed < n.Cancelled).toBe(true)
  })
})
