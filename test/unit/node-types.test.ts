import { describe, expect, it } from 'vitest'
import {
  ActivityStatus,
  fieldRule,
  isWeftError,
  knownNodeTypes,
  nodeTypeDef,
  Role,
  validateContent,
  type ErrorCode,
  type JsonObject,
} from '../../shared/index.js'

function expectError(code: ErrorCode, fn: () => unknown, mentions?: string): void {
  try {
    fn()
  } catch (e) {
    expect(isWeftError(e) && e.code).toBe(code)
    if (mentions) expect((e as Error).message).toContain(mentions)
    return
  }
  expect.fail(`expected a WeftError ${code}`)
}

const invalid = (nodeType: string, content: JsonObject, mentions?: string): void =>
  expectError('invalid_content', () => validateContent(nodeType, content), mentions)

describe('validateContent', () => {
  it('DESIGN node types are all known', () => {
    const known = knownNodeTypes()
    for (const t of ['User', 'Space', 'Group', 'Membership', 'AccessAssignment', 'Document', 'Invitation', 'EventSubscription', 'ActivityLog', 'Code', 'Thread']) {
      expect(known).toContain(t)
    }
  })

  it('ActivityLog: Status and RequestedStatus are ActivityStatus names', () => {
    for (const status of ActivityStatus.members) {
      expect(() => validateContent('ActivityLog', { Status: status, RequestedStatus: status })).not.toThrow()
    }
    expect(() => validateContent('ActivityLog', {})).not.toThrow()
    expect(() => validateContent('ActivityLog', { RequestedStatus: null, End: null, Messages: [] })).not.toThrow()
    // Unknown fields are kept (additive evolution).
    expect(() => validateContent('ActivityLog', { Status: 'Running', Extra: { any: 1 } })).not.toThrow()
    invalid('ActivityLog', { Status: 'Bogus' }, 'Status')
    invalid('ActivityLog', { Status: 'running' }, 'Status') // names are case-sensitive
    invalid('ActivityLog', { Status: 0 }, 'Status') // persisted by name, not number
    invalid('ActivityLog', { Status: null }, 'Status')
    invalid('ActivityLog', { RequestedStatus: 'Stop' }, 'RequestedStatus')
    invalid('ActivityLog', { Messages: 'not a list' }, 'Messages')
    invalid('ActivityLog', { End: '' }, 'End')
  })

  it('AccessAssignment needs a Subject and a Role', () => {
    for (const role of Role.members) {
      expect(() => validateContent('AccessAssignment', { Subject: 'carol', Role: role })).not.toThrow()
    }
    expect(() => validateContent('AccessAssignment', { Subject: 'g', Role: 'Viewer', Denied: true })).not.toThrow()
    invalid('AccessAssignment', { Role: 'Editor' }, 'Subject')
    invalid('AccessAssignment', { Subject: '', Role: 'Editor' }, 'Subject')
    invalid('AccessAssignment', { Subject: 'carol' }, 'Role')
    invalid('AccessAssignment', { Subject: 'carol', Role: 'Owner' }, 'Role')
    invalid('AccessAssignment', { Subject: 'carol', Role: 'editor' }, 'Role')
    invalid('AccessAssignment', { Subject: 'carol', Role: 'Editor', Denied: 'yes' }, 'Denied')
    invalid('AccessAssignment', {})
  })

  it('User: Email must be an email address', () => {
    expect(() => validateContent('User', { Email: 'carol@example.com', FullName: 'Carol', PinnedPaths: ['a/b'] })).not.toThrow()
    invalid('User', { Email: 'not-an-email' }, 'Email')
    invalid('User', { PinnedPaths: 'a' }, 'PinnedPaths')
  })

  it('Document and unknown node types take any JSON object', () => {
    for (const t of ['Document', 'MyModule.Widget', 'Widget_2']) {
      expect(() => validateContent(t, {})).not.toThrow()
      expect(() => validateContent(t, { anything: [1, { x: null }], Status: 'whatever' })).not.toThrow()
    }
  })
})

describe('fieldRule', () => {
  it('ActivityLog: only system writes Status, Messages and End; an Editor may patch RequestedStatus', () => {
    expect(fieldRule('ActivityLog', 'Status')).toBe('system')
    expect(fieldRule('ActivityLog', 'Messages')).toBe('system')
    expect(fieldRule('ActivityLog', 'End')).toBe('system')
    // [ACT17] The run's creator (CreatedBy) or anyone with Update.
    expect(fieldRule('ActivityLog', 'RequestedStatus')).toBe('owner')
    expect(fieldRule('ActivityLog', 'Inputs')).toBe('owner')
    expect(nodeTypeDef('ActivityLog').ownerField).toBe('CreatedBy')
    expect(fieldRule('ActivityLog', 'SomethingElse')).toBe('Update')
  })

  it('[ACT17] ActivityLog: who and what runs is written by system only', () => {
    for (const f of ['StartedBy', 'Source', 'Language', 'CodePath', 'CreatedBy']) expect(fieldRule('ActivityLog', f)).toBe('system')
  })

  it('User: only system writes Email', () => {
    expect(fieldRule('User', 'Email')).toBe('system')
    expect(fieldRule('User', 'FullName')).toBe('Update')
    expect(fieldRule('User', 'PinnedPaths')).toBe('Update')
  })

  it('EventSubscription nodes are written by system and Admins only', () => {
    expect(fieldRule('EventSubscription', 'Status')).toBe('admin')
    expect(fieldRule('EventSubscription', 'TriggerType')).toBe('admin')
    expect(nodeTypeDef('EventSubscription').create).toBe('admin')
  })

  it('field names are exact (no case folding, no prototype members)', () => {
    expect(fieldRule('ActivityLog', 'status')).toBe('Update')
    expect(fieldRule('Document', 'constructor')).toBe('Update')
    expect(fieldRule('Document', '__proto__')).toBe('Update')
    expect(fieldRule('Document', 'toString')).toBe('Update')
  })

  it('an unknown node type behaves like Document', () => {
    const doc = nodeTypeDef('Document')
    const unknown = nodeTypeDef('MyModule.Widget')
    expect(unknown.name).toBe('MyModule.Widget')
    expect({ ...unknown, name: 'Document', content: null }).toEqual({ ...doc, content: null })
    expect(fieldRule('MyModule.Widget', 'Status')).toBe(fieldRule('Document', 'Status'))
  })
})

describe('node type names', () => {
  it.each(['', ' ', '1abc', '_x', 'a b', 'a/b', 'a-b', 'Wïdget', 'x'.repeat(101), '__proto__', 'constructor!'])(
    'rejects %j with invalid_node_type',
    (name) => {
      expectError('invalid_node_type', () => nodeTypeDef(name))
      expectError('invalid_node_type', () => validateContent(name, {}))
      expectError('invalid_node_type', () => fieldRule(name, 'a'))
    },
  )

  it('accepts letters, digits, _ and . starting with a letter (up to 100 characters)', () => {
    for (const name of ['A', 'a1', 'My.Module_Type', 'x'.repeat(100)]) expect(nodeTypeDef(name).name).toBe(name)
  })

  it('names that are Object.prototype members are not mistaken for registered types', () => {
    const def = nodeTypeDef('constructor')
    expect(def.name).toBe('constructor')
    expect(fieldRule('toString', 'x')).toBe('Update')
  })
})
