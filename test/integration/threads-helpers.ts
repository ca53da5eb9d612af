import { expect } from 'vitest'
import type { MeshNode } from '../../shared/index.js'
import type { Clock } from '../../sync-server/engines/threads/index.js'
import { api, expectStatus, nodeUrlPath, waitFor } from '../helpers/index.js'

/**
 * A clock whose sleeps end when the test says so (`release`), so a "slow round" is held open by
 * the test, not by a wall-clock duration: the tests pass on a machine of any speed.
 */
export class HeldClock implements Clock {
  private readonly held = new Set<() => void>()
  now(): Date {
    return new Date()
  }
  sleep(_ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason as Error)
      const done = () => {
        this.held.delete(done)
        signal.removeEventListener('abort', onAbort)
        resolve()
      }
      const onAbort = () => {
        this.held.delete(done)
        reject(signal.reason as Error)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.held.add(done)
    })
  }
  /** Ends every sleep under way. */
  release(): void {
    for (const d of [...this.held]) d()
  }
  get sleeping(): number {
    return this.held.size
  }
}

export async function createThread(url: string, token: string, path: string, content: Record<string, unknown> = {}): Promise<string> {
  expectStatus(await api(url, token).putNode(path, 'Thread', { Agent: { Kind: 'builtin' }, ...content } as never), 201)
  return path
}

export async function post(url: string, token: string, thread: string, text: string, id?: string): Promise<string> {
  const res = await api(url, token).post<{ path: string }>(`/api/nodes/${nodeUrlPath(thread)}/messages`, id === undefined ? { text } : { id, text })
  expectStatus(res, 201)
  return res.body.path
}

export async function node(url: string, token: string, path: string): Promise<MeshNode> {
  const res = await api(url, token).getNode(path)
  expectStatus(res, 200)
  return res.body
}

/** The thread once it rests with nothing pending (and, optionally, `pred` holds). */
export async function settled(url: string, token: string, thread: string, pred: (n: MeshNode) => boolean = () => true, timeoutMs = 15_000): Promise<MeshNode> {
  return waitFor(async () => {
    const n = await node(url, token, thread)
    const c = n.content
    const pending = Array.isArray(c.PendingUserMessages) ? c.PendingUserMessages.length : 0
    return (c.Status === 'Idle' || c.Status === 'Cancelled') && pending === 0 && c.Round === undefined && pred(n) ? n : null
  }, { timeoutMs, description: `${thread} settles` })
}

export async function statusIs(url: string, token: string, thread: string, status: string, timeoutMs = 15_000): Promise<MeshNode> {
  return waitFor(async () => {
    const n = await node(url, token, thread)
    return n.content.Status === status ? n : null
  }, { timeoutMs, description: `${thread} is ${status}` })
}

/** The response cells (role assistant) of a thread, in Messages order. */
export async function cells(url: string, token: string, thread: MeshNode): Promise<MeshNode[]> {
  const out: MeshNode[] = []
  for (const p of (thread.content.Messages as string[]) ?? []) out.push(await node(url, token, p))
  return out
}

/** Thread invariants ([THR3]): each id ingested once, in Messages once, one response cell per round. */
export async function expectInvariants(url: string, token: string, thread: MeshNode): Promise<void> {
  const c = thread.content
  const ingested = (c.IngestedMessageIds as string[]) ?? []
  expect(new Set(ingested).size).toBe(ingested.length)
  const messages = (c.Messages as string[]) ?? []
  expect(new Set(messages).size).toBe(messages.length)
  const all = await cells(url, token, thread)
  // Rounds: each run of user cells is followed by exactly one assistant cell.
  let users = 0
  for (const cell of all) {
    if (cell.content.Role === 'user') users++
    else if (cell.content.Role === 'assistant') {
      expect(users).toBeGreaterThan(0)
      users = 0
    }
  }
  expect(users).toBe(0)
  expect(c.Status).not.toBe('StartingExecution')
}
