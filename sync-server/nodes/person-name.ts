import { SYSTEM, type MeshNode, type NodePath, type Principal } from '../../shared/index.js'

/**
 * The name a person reads for an account: its profile's FullName, else the profile's name; null
 * when the account has no profile. Read as system: the pages that say it (the operator's stuck
 * runs, a subscription's consumers, a space's trash) show someone whose profile the reader
 * cannot open, and the name is what presence and the members list already tell.
 */
export async function personName(nodes: { get(principal: Principal, path: NodePath): Promise<MeshNode | null> }, userId: string): Promise<string | null> {
  const profile = await nodes.get(SYSTEM, userId as NodePath).catch(() => null)
  if (profile?.nodeType !== 'User') return null
  const full = profile.content.FullName
  return typeof full === 'string' && full.trim() ? full : profile.name || null
}

/** `personName` of each account, each read once, all at once: a page listing many by whom. */
export async function personNames(nodes: Parameters<typeof personName>[0], userIds: Iterable<string>): Promise<Map<string, string | null>> {
  const ids = [...new Set(userIds)]
  const names = await Promise.all(ids.map((id) => personName(nodes, id)))
  return new Map(ids.map((id, i) => [id, names[i]!]))
}
