import { afterAll, describe, expect, it } from 'vitest'
import { api, createSpace, makeTempDir, removeDir, signup, spawnServer, waitFor, type SpawnedServer } from '../helpers/index.js'
import { createThread, node, post, statusIs } from './threads-helpers.js'

/**
 * [THR7][THR9] kill -9 while a delegated sub-thread runs: after the restart the sub-thread's round
 * resumes, the parent's round resumes into its one response cell, and the parent continues once.
 */
describe('[THR9] kill -9 mid-delegation', () => {
  let dir = ''
  const children: SpawnedServer[] = []
  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL')
    if (dir) await removeDir(dir)
  })

  it('the parent continues exactly once after the restart', { timeout: 300_000 }, async () => {
    dir = await makeTempDir('weft-thr-kill9-')
    const first = await spawnServer({ dataDir: dir, startTimeoutMs: 90_000 })
    children.push(first)
    const user = await signup(first.url)
    const space = await createSpace(first.url, user.token)
    const t = await createThread(first.url, user.token, `${space}/lead`)
    await post(first.url, user.token, t, '/delegate /sleep 3000', 'd1')
    const sub = `${t}/_sub.d1`
    await statusIs(first.url, user.token, sub, 'Executing', 20_000)
    expect((await node(first.url, user.token, t)).content.Status).toBe('Executing')
    await first.kill('SIGKILL')

    const second = await spawnServer({ dataDir: dir, startTimeoutMs: 90_000 })
    children.push(second)
    const done = await waitFor(async () => {
      const n = (await api(second.url, user.token).getNode(t)).body
      return n.content?.Disposition === 'Completed' && n.content.Status === 'Idle' ? n : null
    }, { timeoutMs: 60_000, description: 'the parent continues' })
    expect((await node(second.url, user.token, `${t}/_r.d1`)).content.Text).toBe('Delegated: You said: /sleep 3000')
    // The subscription's hand-back is recorded once; no second round ran.
    const tool = await waitFor(async () => {
      const n = await node(second.url, user.token, t)
      return (n.content.Messages as string[]).find((m) => m.includes('/_t.'))
    }, { timeoutMs: 30_000, description: 'the hand-back is recorded' })
    const final = await node(second.url, user.token, t)
    expect(final.content.Messages).toEqual([`${t}/d1`, `${t}/_r.d1`, tool])
    expect(final.content.IngestedMessageIds).toEqual(['d1'])
    expect(done.content.UserMessageIds).toEqual(['d1'])
    const subNode = await node(second.url, user.token, sub)
    expect(subNode.content.Messages).toEqual([`${sub}/task`, `${sub}/_r.task`])
    expect((await node(second.url, user.token, `${sub}/_r.task`)).content.Text).toBe('You said: /sleep 3000')
  })
})
