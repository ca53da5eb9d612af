import { randomUUID } from 'node:crypto'
import type { JsonObject, Role } from '../../shared/index.js'
import { api, expectStatus } from './api.js'

/**
 * Set-up steps of the access model (DESIGN.md "Identity and access"), each one HTTP call that
 * must succeed. They throw with the server's answer when it does not, so a broken set-up is
 * never mistaken for the behaviour under test.
 */

/** A top-level name no other test uses. */
export function uniqueName(prefix = 'space'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`
}

/** Creates a Space at a free top-level path; the creator becomes its Admin. */
export async function createSpace(url: string, token: string, name = uniqueName()): Promise<string> {
  expectStatus(await api(url, token).putNode(name, 'Space', {}), 201)
  return name
}

/** Grants `role` on `scope` to a user id or a group path: `{scope}/_Access/{subject}_Access`. */
export async function grantRole(
  url: string,
  adminToken: string,
  scope: string,
  subject: string,
  role: Role,
  denied?: boolean,
): Promise<string> {
  const path = `${scope}/_Access/${accessSegment(subject)}_Access`
  const content: JsonObject = { Subject: subject, Role: role }
  if (denied !== undefined) content.Denied = denied
  expectStatus(await api(url, adminToken).putNode(path, 'AccessAssignment', content), 200, 201)
  return path
}

/**
 * A group subject is a path (`space/Team`); path segments cannot contain `/`, so the assignment
 * node's segment uses the group path with `/` replaced by `.`. Only the `Subject` field names
 * the subject; the segment is a label.
 */
export function accessSegment(subject: string): string {
  return subject.replaceAll('/', '.')
}

/** Creates a Group node at `path` (the caller needs Create on the parent). */
export async function createGroup(url: string, token: string, path: string): Promise<string> {
  expectStatus(await api(url, token).putNode(path, 'Group', {}), 201)
  return path
}

/** Makes `userId` a member of `group`: `{group}/{userId}_Membership`. */
export async function addMember(url: string, token: string, group: string, userId: string): Promise<string> {
  const path = `${group}/${userId}_Membership`
  expectStatus(await api(url, token).putNode(path, 'Membership', {}), 201)
  return path
}

/** Creates a Document node with `content` and returns its path. */
export async function createDocument(url: string, token: string, path: string, content: JsonObject = {}): Promise<string> {
  expectStatus(await api(url, token).putNode(path, 'Document', content), 201)
  return path
}
