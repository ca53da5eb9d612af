/**
 * [WEB19] What a new Code node starts from: a commented tour of the script API (DESIGN.md
 * "Activities (contract)", docs/API.md), runnable as it is. Everything but the last lines is a
 * comment, so deleting the comments leaves the person's own script.
 */
export const CODE_TEMPLATE = `// A script runs on the server as a run (an activity) that acts as whoever starts it:
// it can do only what they could. The body is an async function: \`await\` and \`return\` work,
// and the returned JSON value is the run's output.
//
// Inputs            the run's inputs; declare them in this node's Inputs field, e.g.
//                   { "Name": { "Type": "string", "Label": "Your name", "Required": true } }
// Log.info(text)    a line in the run's log (also Log.warn, Log.error: an error ends it Failed)
// Progress(0.5, 'half way')   the progress bar (a fraction from 0 to 1, optional text)
// Ct.aborted        true once someone cancelled the run; Ct.throwIfAborted() stops here then
// await sleep(ms)   waits (ends early on cancel)
// await Mesh.get(path)                      a node ({ path, nodeType, name, content }) or null
// await Mesh.put(path, { nodeType, content })  creates or replaces a node
// await Mesh.patch(path, { Field: value })  changes fields (null removes one)
// await Mesh.delete(path)
// await Mesh.query({ parent, nodeType, where, limit })   nodes you can read
// await Mesh.waitFor(path, { Status: 'Done' }, { timeoutMs: 60000 })
// A path names a node by its place, e.g. 'my-space/notes' (a node's name may be in any
// language; its path is plain letters): open the node and copy what follows #/n/ in the address.
// A refused Mesh call throws an error whose \`code\` says why (forbidden, not_found, ...).

Log.info('Hello from ' + (Inputs.Name ?? 'a new script'))
return { ok: true }
`

/** The content a Code node created in the app starts with. */
export function newCodeContent(): Record<string, unknown> {
  return { Language: 'javascript', IsExecutable: true, Source: CODE_TEMPLATE }
}
