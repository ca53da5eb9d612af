import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createActivitiesEngine } from '../../sync-server/engines/activities/index.js'
import { api, createSpace, signup, startTestServer, waitFor, type TestServer, type TestUser } from '../helpers/index.js'
import { createCode, run, texts } from './activities-helpers.js'

/**
 * [ACT9] A graceful stop while a script runs: the run ends with the reason it ended, written before
 * the store closes (the server's abort signal and its close both stop the engine; the close waits
 * for that stop and its terminal writes). The next boot finds the outcome, not an orphan to fail.
 */
describe('[ACT9] a script running when the server is stopped gracefully', () => {
  let ts: TestServer
  let user: TestUser
  beforeAll(async () => {
    ts = await startTestServer({ config: { engines: [createActivitiesEngine({ timeoutMs: 60_000, spares: 1, seedTemplates: false })] } })
    user = await signup(ts.url)
  })
  afterAll(() => ts.cleanup())

  it('ends Failed with "The server is shutting down." written at the stop, not as an orphan by the next boot', { timeout: 90_000 }, async () => {
    const space = await createSpace(ts.url, user.token)
    const code = await createCode(ts.url, user.token, `${space}/slow`, 'Log.info("started"); for (;;) await sleep(50)')
    const path = await run(ts.url, user.token, code)
    await waitFor(async () => texts((await api(ts.url, user.token).getNode(path)).body as never).includes('started'), 15_000)
    await ts.restart()
    const after = (await api(ts.url, user.token).getNode(path)).body
    expect(after.content.Status).toBe('Failed')
    expect(after.content.Error).toBe('The server is shutting down.')
    expect(typeof after.content.End).toBe('string')
    expect(texts(after).join('\n')).not.toMatch(/server restarted/)
  })
})
