import { HttpError, NetworkError } from '../api/index.js'
import { fieldLabel } from './labels.js'

/**
 * What a person reads for an error: mapped from the stable error code, never the server's or
 * a validator's raw text ("name: Too small: expected string…", "No API at /api/."). Messages
 * Weft writes for people itself (the size of a refused edit) are kept.
 */
const BY_CODE: Record<string, string> = {
  already_exists: 'That name is already taken here.',
  forbidden: 'You do not have permission to do that here.',
  forbidden_field: 'You cannot change this field: it is written by the system or by an Admin.',
  not_found: 'This node does not exist (any more).',
  invalid_content: 'That value is not allowed for this kind of node, or it holds a character no server can store (a NUL, or half of an emoji).',
  invalid_patch: 'That value cannot be saved: it is not valid JSON, it is nested too deeply, or it holds a character no server can store (a NUL, or half of an emoji).',
  invalid_json: 'That value is not valid JSON.',
  invalid_path: 'That name cannot be used here. Use letters, digits, spaces, dots, dashes or @.',
  invalid_node_type: 'That node type is not known.',
  invalid_request: 'The server could not understand the request. Check the form and try again.',
  invalid_update: 'The server could not apply this edit; it was kept so you can copy it.',
  client_id_conflict: 'Someone else wrote under this device’s edit id for this page, so the edit was not saved; it was kept so you can copy it.',
  unauthorized: 'You are signed out. Sign in again; your changes stay on this device.',
  invalid_credentials: 'The email or password is not right.',
  rate_limited: 'Too many failed sign-ins. Wait a little and try again.',
  email_taken: 'An account with this email already exists. Sign in instead.',
  invalid_move: 'That cannot move there: a space, a home and the Admin area keep their place, a group keeps its place, and nothing moves into itself.',
  moved: 'This node was moved.',
  last_admin: 'A space always keeps at least one Admin.',
  conflict: 'Someone changed this at the same time. Try again.',
  // [WEB129] A letter re-driven (or handled) since the page was read.
  contextual_not_dead_letter: 'That letter is no longer dead: someone re-drove it meanwhile, or it was handled.',
  payload_too_large: 'This change is larger than the server accepts.',
  unavailable: 'The server is busy or starting. Try again in a moment.',
  internal: 'The server hit a problem. Try again; if it keeps happening, tell the server’s admin.',
}

/**
 * [OPS12] A refusal code in a few words, where a count stands beside it (the operator's Refused
 * tile: "not found 8"); the full sentence is humanMessage's.
 */
const CODE_WORDS: Record<string, string> = {
  already_exists: 'name taken',
  forbidden: 'not allowed',
  forbidden_field: 'system fields',
  not_found: 'not found',
  invalid_content: 'invalid content',
  invalid_patch: 'invalid edits',
  invalid_json: 'invalid JSON',
  invalid_path: 'invalid names',
  invalid_node_type: 'unknown types',
  invalid_request: 'malformed requests',
  invalid_update: 'invalid edits',
  client_id_conflict: 'edit id clashes',
  unauthorized: 'signed out',
  invalid_credentials: 'wrong sign-ins',
  rate_limited: 'too many sign-ins',
  email_taken: 'email taken',
  invalid_move: 'moves refused',
  moved: 'moved',
  last_admin: 'last Admin kept',
  conflict: 'conflicts',
  payload_too_large: 'too large',
  unavailable: 'busy',
  internal: 'server errors',
}

export function codeWords(code: string): string {
  return Object.prototype.hasOwnProperty.call(CODE_WORDS, code) ? CODE_WORDS[code]! : code.replace(/_/g, ' ')
}

/** Codes whose message Weft itself writes for people (with the numbers that matter). */
const OWN_MESSAGES = new Set(['payload_too_large', 'rate_limited'])

/** An error shown under a node's fields, with an action that resolves it where there is one. */
export interface FieldProblem {
  message: string
  /**
   * [WEB102] The field it concerns: shown beside that field (the input described by it), not
   * under the whole list. None: shown under the list, by the "Add a field" form.
   */
  key?: string
  fix?: () => void
  fixLabel?: string
}

/**
 * [STO10] The message for a value refused for the characters in it, with the fix that replaces them.
 * [WEB77] The field is named by its label as the page shows it ("Short caption", not `ShortCaption`).
 */
export function unstorableProblem(key: string, fix: () => void): FieldProblem {
  return { key, message: `${fieldLabel(key)}: that text holds a character no server can store (a NUL, or half of an emoji), so it was not saved.`, fix, fixLabel: 'Replace them with � and save' }
}

export function codeOf(e: unknown): string | null {
  if (e instanceof HttpError) return e.code
  if (e instanceof NetworkError) return 'network'
  const code = (e as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : null
}

/**
 * [WEB64] How a message is read. `typed`: the request is made of what the person typed and
 * nothing else the app composed (a search, an email to invite), so a refusal of it as
 * `invalid_request` is about their input, and the server's own sentence ("A search is at most
 * 200 characters.") says what to change; anywhere else that code means the app sent something
 * wrong, and the server's words are for developers.
 */
export interface MessageContext {
  typed?: boolean
}

/**
 * [WEB120] An `invalid_content` refusal that is not about unstorable characters: the server's
 * sentence names the field and the rule ("… invalid at Reactions.返信: use letters, digits and _"),
 * where the app's own sentence could only guess (and guessed "a character no server can store").
 */
const UNSTORABLE_WORDS = /NUL|half of a character|half of an emoji/

/**
 * [WEB120] A refusal the app does not know by code (a ContextualSubscription's bounds, a newer
 * server's): the server writes its sentence for people ("Limits.LeaseSeconds must be between 5
 * and 900 (got 1)."), so it is shown; without one, the refusal is named, never "Try again", which
 * only helps when the failure was passing.
 */
function unknownRefusal(code: string, message: string | undefined): string {
  return message || `The server refused this (${code.replace(/_/g, ' ')}).`
}

export function humanMessage(code: string | null | undefined, message?: string, context: MessageContext = {}): string {
  if (code && OWN_MESSAGES.has(code) && message) return message
  if (code === 'invalid_content' && message && !UNSTORABLE_WORDS.test(message)) return message
  if (code === 'invalid_request' && context.typed && message) return message
  if (code === 'network') return 'The server cannot be reached. Your change was not sent; try again when you are back online.'
  if (code && BY_CODE[code]) return BY_CODE[code]
  if (code && /^http_404$/.test(code)) return 'The server does not offer this yet (it may be an older version).'
  if (code && /^http_5\d\d$/.test(code)) return BY_CODE.internal!
  if (code && code !== 'network' && !/^http_\d+$/.test(code)) return unknownRefusal(code, message)
  return 'Something went wrong. Try again.'
}

export function humanError(e: unknown, context: MessageContext = {}): string {
  return humanMessage(codeOf(e), e instanceof Error ? e.message : undefined, context)
}
