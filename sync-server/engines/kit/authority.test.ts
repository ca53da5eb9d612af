import { describe, expect, it } from 'vitest'
import { SYSTEM, WeftError, userPrincipal, type JsonObject, type MeshNode, type NodePath, type Role, type UserId } from '../../../shared/index.js'
import { AccessService, assignmentLabel } from '../../access/access-service.js'
import { activityWriteRule } from '../activities/activity-rules.js'
import { actAs, request, requesterOf } from './authority.js'

function assignment(access: AccessService, scope: string, subject: string, role: Role, denied = false): MeshNode {
  const node: MeshNode = {
    path: `${scope}/_Access/${assignmentLabel(subject)}` as NodePath,
    nodeType: 'AccessAssignment',
    name: subject,
    content: denied ? { Subject: subject, Role: role, Denied: true } : { Subject: subject, Role: role },
    createdBy: 'system',
    createdAt: '',
    updatedAt: '',
    version: 1,
    state: 'Active',
  }
  access.observe(null, node)
  return node
}

const bob = userPrincipal('bob' as UserId)
const code = 'S/tool' as NodePath

function code403(fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (e) {
    return e instanceof WeftError ? e.code : 'thrown'
  }
}

describe('[ACT17] kit/authority: act as the principal who asked, checked when asked and when acting', () => {
  it('request checks the permission now and returns the requester to keep', () => {
    const access = new AccessService()
    expect(code403(() => request(access, bob, 'Execute', code))).toBe('forbidden')
    assignment(access, 'S', 'bob', 'Viewer')
    expect(request(access, bob, 'Execute', code)).toEqual({ userId: 'bob', permission: 'Execute', path: code })
    expect(code403(() => request(access, bob, 'Update', code))).toBe('forbidden')
    // System does not request: its work is its own.
    expect(code403(() => request(access, SYSTEM, 'Execute', code))).toBe('forbidden')
  })

  it('actAs re-checks: a role taken away, or a Denied added, between asking and acting refuses', () => {
    const access = new AccessService()
    const grant = assignment(access, 'S', 'bob', 'Editor')
    const asked = request(access, bob, 'Execute', code)
    expect(actAs(access, asked)).toEqual(bob)
    const denial = assignment(access, code, 'bob', 'Viewer', true)
    expect(code403(() => actAs(access, asked))).toBe('forbidden')
    access.observe(denial, null)
    expect(actAs(access, asked)).toEqual(bob)
    access.observe(grant, null)
    expect(code403(() => actAs(access, asked))).toBe('forbidden')
  })

  it('requesterOf reads a requester back from node fields, and nobody from missing or forged ones', () => {
    expect(requesterOf('bob', 'Execute', 'S/tool')).toEqual({ userId: 'bob', permission: 'Execute', path: 'S/tool' })
    for (const [who, path] of [[undefined, 'S/tool'], ['', 'S/tool'], ['system', 'S/tool'], [42, 'S/tool'], ['bob', undefined], ['bob', '../x'], ['bob', '']] as const) {
      expect(requesterOf(who, 'Execute', path)).toBeNull()
    }
  })
})

describe('[ACT17] the ActivityLog write rule', () => {
  const access = new AccessService()
  assignment(access, 'S', 'bob', 'Editor')
  assignment(access, 'S', 'carol', 'Viewer')
  assignment(access, 'S/locked', 'carol', 'Viewer', true)
  const written = activityWriteRule(access)
  const rule = (w: Omit<Parameters<typeof written>[0], 'path' | 'origin'>) => written({ ...w, path: 'S/_Activity/a' as NodePath, origin: 'http' })
  const log = (content: JsonObject): MeshNode => ({ path: 'S/_Activity/a' as NodePath, nodeType: 'ActivityLog', name: 'a', content, createdBy: 'system', createdAt: '', updatedAt: '', version: 1, state: 'Active' })
  const draft = { CodePath: 'S/tool', CreatedBy: 'carol', Inputs: { a: 1 } }
  const as = (id: string) => ({ kind: 'user' as const, userId: id as UserId })

  it('a start request on a draft records its writer as StartedBy, if they may execute the Code node', () => {
    expect(rule({ principal: as('bob'), before: log(draft), after: { ...draft, RequestedStatus: 'Running' } })).toEqual({ StartedBy: 'bob' })
    expect(rule({ principal: as('carol'), before: log(draft), after: { ...draft, RequestedStatus: 'Running' } })).toEqual({ StartedBy: 'carol' })
    const locked = { ...draft, CodePath: 'S/locked/tool' }
    expect(code403(() => rule({ principal: as('carol'), before: log(locked), after: { ...locked, RequestedStatus: 'Running' } }))).toBe('forbidden')
  })

  it('nothing to record for other writes: a cancel, a request already made, a started run', () => {
    expect(rule({ principal: as('bob'), before: log(draft), after: { ...draft, RequestedStatus: 'Cancelled' } })).toBeUndefined()
    expect(rule({ principal: as('bob'), before: log({ ...draft, RequestedStatus: 'Running' }), after: { ...draft, RequestedStatus: 'Running' } })).toBeUndefined()
    const running = { ...draft, Status: 'Running', RequestedStatus: 'Running' }
    expect(rule({ principal: as('bob'), before: log({ ...running, RequestedStatus: 'Cancelled' }), after: running })).toBeUndefined()
  })

  it('once a start is requested, the draft\'s Inputs are fixed (conflict)', () => {
    const requested = { ...draft, RequestedStatus: 'Running', StartedBy: 'bob' }
    expect(code403(() => rule({ principal: as('carol'), before: log(requested), after: { ...requested, Inputs: { a: 2 } } }))).toBe('conflict')
    // Asked together with the start: those are the inputs it starts on.
    expect(rule({ principal: as('bob'), before: log(draft), after: { ...draft, Inputs: { a: 2 }, RequestedStatus: 'Running' } })).toEqual({ StartedBy: 'bob' })
  })
})
