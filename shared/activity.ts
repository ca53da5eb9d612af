import { ActivityStatus, Permission } from './enums.js'
import { isJsonObject, type JsonObject, type JsonValue } from './json.js'

/**
 * The activity model of DESIGN.md "Activities (contract)": pure functions shared by the engine,
 * the web app and tests. No I/O here.
 */

/** Reserved child segment under which a node hosts its activities. */
export const ACTIVITY_SEGMENT = '_Activity'
/** Where partition definitions live (exists from boot). */
export const PARTITION_CATALOG = 'Admin/Partition'
/** The sentinel in ActivityParentPath / DefaultActivityParentPath for the caller's home. */
export const VIEWER_SENTINEL = '{viewer}'

export const LogLevel = { Info: 'Info', Warning: 'Warning', Error: 'Error' } as const
export type LogLevel = (typeof LogLevel)[keyof typeof LogLevel]

export interface ActivityMessage {
  Level: LogLevel
  Text: string
  At: string
}

export interface ActivityProgress {
  Fraction: number
  Text?: string
}

/** Fields only `system` writes on an ActivityLog (create, replace and patch alike). */
export const ACTIVITY_SYSTEM_FIELDS = ['Status', 'Messages', 'Progress', 'Start', 'End', 'ReturnValue', 'Error', 'CreatedBy', 'StartedBy', 'Source', 'Language', 'CodePath'] as const

export function isActivityStatus(v: unknown): v is ActivityStatus {
  return ActivityStatus.isMember(v)
}

/** [ACT4] Running is the only non-terminal status; a missing Status is a draft. */
export function isTerminal(status: unknown): boolean {
  return isActivityStatus(status) && status !== 'Running'
}

/** The more severe of two statuses (ActivityStatus is ordered: Running < Succeeded < Warning < Failed < Cancelled). */
export function maxStatus(a: ActivityStatus, b: ActivityStatus): ActivityStatus {
  return ActivityStatus.number[a] >= ActivityStatus.number[b] ? a : b
}

/** What the messages say: an Error message → Failed, a Warning → Warning, otherwise Succeeded. */
export function finalStatusOf(messages: unknown): ActivityStatus {
  let out: ActivityStatus = 'Succeeded'
  if (!Array.isArray(messages)) return out
  for (const m of messages) {
    if (!isJsonObject(m)) continue
    if (m.Level === LogLevel.Error) return 'Failed'
    if (m.Level === LogLevel.Warning) out = 'Warning'
  }
  return out
}

/**
 * [ACT3] The terminal write: Status = max(floor, what the messages say), End set. `floor` is the
 * natural outcome (Succeeded on success, Failed on a throw, Cancelled on cancel). A floor of
 * Running is lifted to Succeeded: finishing never leaves a log Running.
 */
export function finish<T extends JsonObject>(log: T, floor: ActivityStatus, at: string = new Date().toISOString()): T & { Status: ActivityStatus; End: string } {
  const natural = floor === 'Running' ? 'Succeeded' : floor
  return { ...log, Status: maxStatus(natural, finalStatusOf(log.Messages)), End: at }
}

export function activityMessage(level: LogLevel, text: string, at: string = new Date().toISOString()): ActivityMessage {
  return { Level: level, Text: text, At: at }
}

// ---------------------------------------------------------------- Code nodes

export const InputType = ['string', 'number', 'boolean', 'json', 'node'] as const
export type InputType = (typeof InputType)[number]

export interface InputDecl {
  Type: InputType
  Label?: string
  Default?: JsonValue
  Required?: boolean
  /**
   * [ACT22] A `node` input only: the permission the run's starter must hold at the node named
   * (ExportJson's `Root` requires `Export`), checked as the run is asked for and as it starts.
   */
  Requires?: Permission
}

/** The declared inputs of a Code node (invalid declarations are skipped, never fatal). */
export function inputDecls(code: JsonObject): Record<string, InputDecl> {
  const raw = code.Inputs
  const out: Record<string, InputDecl> = {}
  if (!isJsonObject(raw)) return out
  for (const [name, d] of Object.entries(raw)) {
    if (!isJsonObject(d)) continue
    const type = (InputType as readonly unknown[]).includes(d.Type) ? (d.Type as InputType) : 'json'
    out[name] = {
      Type: type,
      Label: typeof d.Label === 'string' ? d.Label : undefined,
      Default: d.Default,
      Required: d.Required === true,
      // An unknown permission is required as itself: nobody holds it, so nobody runs the code
      // (a misspelt requirement never turns into none).
      ...(type === 'node' && d.Requires !== undefined ? { Requires: (Permission.members as readonly unknown[]).includes(d.Requires) ? (d.Requires as Permission) : (String(d.Requires) as Permission) } : {}),
    }
  }
  return out
}

/** [ACT22] The permissions a run's starter must hold at the nodes its inputs name. */
export function inputRequirements(code: JsonObject, inputs: JsonObject): Array<{ name: string; permission: Permission; path: JsonValue | undefined }> {
  return Object.entries(inputDecls(code))
    .filter(([, d]) => d.Requires !== undefined)
    .map(([name, d]) => ({ name, permission: d.Requires as Permission, path: inputs[name] }))
}

/** Declared defaults, overridden by the caller's inputs. */
export function mergeInputs(code: JsonObject, inputs: JsonObject | undefined): JsonObject {
  const out: JsonObject = {}
  for (const [name, d] of Object.entries(inputDecls(code))) if (d.Default !== undefined) out[name] = d.Default
  for (const [name, v] of Object.entries(inputs ?? {})) if (v !== undefined) out[name] = v
  return out
}

/** Names of required inputs that have no value. */
export function missingInputs(code: JsonObject, inputs: JsonObject): string[] {
  return Object.entries(inputDecls(code))
    .filter(([name, d]) => d.Required && (inputs[name] === undefined || inputs[name] === null || inputs[name] === ''))
    .map(([name]) => name)
}

function expandViewer(template: string, viewer: string): string {
  return template.split(VIEWER_SENTINEL).join(viewer)
}

/**
 * [ACT6] Where a run of the Code node at `codePath` lands: its ActivityParentPath, else the
 * partition's DefaultActivityParentPath, else the partition root (the first segment). The
 * literal `{viewer}` is the caller's home.
 */
export function activityParentPath(codePath: string, code: JsonObject, partition: JsonObject | null, viewer: string): string {
  const own = code.ActivityParentPath
  if (typeof own === 'string' && own.trim() !== '') return expandViewer(own.trim(), viewer)
  const dflt = partition?.DefaultActivityParentPath
  if (typeof dflt === 'string' && dflt.trim() !== '') return expandViewer(dflt.trim(), viewer)
  return partitionName(codePath)
}

export function partitionName(path: string): string {
  const i = path.indexOf('/')
  return i < 0 ? path : path.slice(0, i)
}

export function partitionPath(name: string): string {
  return `${PARTITION_CATALOG}/${name}`
}

/**
 * [ACT11] Where partition definitions may live. `Admin/Partition/{name}` is a leaf whose `{name}`
 * is a top-level node other than `Admin`: for a path at or under the catalog, the name it
 * defines, or a reason it is no place for a node. Null for paths outside the catalog.
 */
export function partitionPlace(path: string): { name: string } | { refused: string } | null {
  const prefix = `${PARTITION_CATALOG}/`
  if (!path.startsWith(prefix)) return null
  const rest = path.slice(prefix.length)
  if (rest.includes('/')) return { refused: `${prefix}{name} is a leaf: nothing can be created under it (${path}).` }
  if (rest === 'Admin') return { refused: `The Admin partition has no definition node (${path}).` }
  return { name: rest }
}

/** Whether `path` is an activity node's path (`.../_Activity/{id}`). */
export function isActivityPath(path: string): boolean {
  const parts = path.split('/')
  return parts.length >= 2 && parts[parts.length - 2] === ACTIVITY_SEGMENT
}
