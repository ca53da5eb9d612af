import { filter, firstValueFrom, takeWhile } from 'rxjs'
import {
  SYSTEM,
  WeftError,
  isJsonObject,
  isTerminal,
  userPrincipal,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
  type UserId,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { runCode } from '../activities/index.js'
import type { Agent, ScriptResult } from './builtin-agent.js'

/**
 * [THR16] Runs the Code node `codePath` as an activity (the activities engine runs it) for the
 * round's principals: each must hold Execute on it. A run acts as ONE person (its `StartedBy`,
 * whose rights every Mesh call of the script meets), so a round of several authors — whose
 * rights are the intersection — cannot lend them to a script: `forbidden`, nothing runs.
 * `onLine` gets each log line as it lands; cancelling `signal` cancels the activity.
 */
export async function runActivity(
  nodes: NodeApi,
  codePath: NodePath,
  inputs: JsonObject,
  principals: readonly UserId[],
  signal: AbortSignal,
  onLine: (text: string) => Promise<void> = async () => undefined,
  onStart: (activity: NodePath) => Promise<void> = async () => undefined,
): Promise<ScriptResult> {
  if (principals.length === 0) throw new WeftError('forbidden', 'Nobody behind this round may run code.')
  for (const u of principals) {
    if (!nodes.permissions(userPrincipal(u), codePath).has('Execute')) throw new WeftError('forbidden', `${u} lacks Execute on ${codePath}.`)
  }
  if (principals.length > 1) {
    throw new WeftError('forbidden', `A run of ${codePath} acts as one person, and this round speaks for ${principals.length} (${principals.join(', ')}): ask in a round of your own.`)
  }
  signal.throwIfAborted()
  const { path } = await runCode(nodes, userPrincipal(principals[0]!), codePath, { inputs })
  const onAbort = () => void nodes.patch(SYSTEM, path, { RequestedStatus: 'Cancelled' }, 'engine').catch(() => undefined)
  signal.addEventListener('abort', onAbort, { once: true })
  await onStart(path)
  let shown = 0
  // The log lines go out one after the other, off the node's stream. The first that fails (the
  // answer past its bound, a cell gone) ends the run: the activity is cancelled and the round
  // fails with that error. The chain never rejects: a rejection nobody awaited yet (the run still
  // going) would end the process.
  let lines: Promise<void> = Promise.resolve()
  let failed: { error: unknown } | null = null
  const line = (text: string) => {
    lines = lines
      .then(() => (failed ? undefined : onLine(text)))
      .catch((error: unknown) => {
        if (failed) return
        failed = { error }
        onAbort()
      })
  }
  try {
    const done = await firstValueFrom(
      nodes.node$(path).pipe(
        takeWhile((n): n is MeshNode => n !== null),
        filter((n) => {
          const msgs = Array.isArray(n.content.Messages) ? n.content.Messages : []
          for (; shown < msgs.length; shown++) {
            const m = msgs[shown] as JsonObject | null
            const text = m && typeof m.Text === 'string' ? m.Text : ''
            line(text)
          }
          return isTerminal(n.content.Status)
        }),
      ),
      { defaultValue: null },
    )
    await lines
    if (failed) throw (failed as { error: unknown }).error
    signal.throwIfAborted()
    if (!done) throw new WeftError('not_found', `The activity ${path} is gone.`)
    const c = done.content
    return {
      status: String(c.Status),
      returnValue: (c.ReturnValue ?? null) as JsonValue,
      error: typeof c.Error === 'string' ? c.Error : null,
      activity: path,
    }
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/**
 * [THR16] The script agent (`Agent: { Kind: "script", CodePath }`): the round runs the Code node
 * as an activity with `Inputs: { Messages, History, Thread }`; its log lines, then its return
 * value (a string as is, `{ Text }`, or JSON), stream into the response cell. A failed run fails
 * the round with its error; cancelling the round cancels the activity.
 */
export const scriptAgent: Agent = async (io) => {
  const codePath = io.agent.CodePath
  if (typeof codePath !== 'string' || codePath === '') {
    return { disposition: 'Failed', error: 'invalid_request: a script agent names its Code node in Agent.CodePath.' }
  }
  const inputs: JsonObject = {
    Messages: [...io.messages],
    History: io.history.map((h) => ({ Role: h.role, Text: h.text })),
    Thread: io.thread,
  }
  const out = await io.tools.runScript(codePath, inputs, io.signal, (line) => io.emit(`${line}\n`))
  if (out.status === 'Failed' || out.status === 'Cancelled') {
    return { disposition: 'Failed', error: `The script ${out.activity} ended ${out.status}${out.error ? `: ${out.error}` : '.'}` }
  }
  const v = out.returnValue
  const text = typeof v === 'string' ? v : isJsonObject(v) && typeof v.Text === 'string' ? v.Text : v === null ? '' : JSON.stringify(v)
  if (text !== '') await io.emit(text)
  return { disposition: 'Completed' }
}
