import { WeftError, isValidSegment, knownNodeTypes, nodeTypeDef, type ContextualParameterSpec } from '../../shared/index.js'

/** [CTX17] [CTX58] A template's placeholders: the event's path, parent and name, and a consumer parameter ([CTX57]: any script). */
export const PLACEHOLDER = /\{(event\.path|event\.parent|event\.name|param\.\p{L}[\p{L}\p{M}\p{N}_]*)\}/gu

const PLACEHOLDERS = '{event.path}, {event.parent}, {event.name} or {param.NAME} (NAME one of the definition’s Parameters)'

/** What a template's placeholders are filled with to check the path it makes (each a valid segment). */
const SAMPLE: Readonly<Record<string, string>> = { 'event.path': 'a/b', 'event.parent': 'a', 'event.name': 'b' }

const invalid = (message: string) => new WeftError('contextual_invalid_template', message)

/**
 * [CTX58] A path template is checked when the definition is written, so a typo is refused with
 * its field's path instead of a reaction that is never offered: every `{…}` is a placeholder
 * ({evnt.path} is not), a `{param.X}` names one of the definition's Parameters of type string or
 * number (the consumer's parameters fill templates; a reaction's own Parameters are its call's
 * values, not known when the target is offered), and the text filled in is a normalised node path
 * (ASCII segments, no "." or "..", no leading, trailing or double "/").
 */
export function checkTemplate(template: string, where: string, params: Readonly<Record<string, ContextualParameterSpec>>, reactionParams?: Readonly<Record<string, ContextualParameterSpec>>): void {
  for (const m of template.matchAll(/\{([^{}]*)\}/g)) {
    const key = m[1]!
    if (key in SAMPLE) continue
    if (!key.startsWith('param.')) throw invalid(`${where} holds ${m[0]}, which is not a placeholder: use ${PLACEHOLDERS}.`)
    const name = key.slice('param.'.length)
    const spec = Object.prototype.hasOwnProperty.call(params, name) ? params[name] : undefined
    if (!spec) {
      const declared = Object.keys(params)
      if (reactionParams && Object.prototype.hasOwnProperty.call(reactionParams, name)) {
        throw invalid(`${where} holds ${m[0]}, but ${name} is one of the reaction's own Parameters (the values of its call, not known when its target is offered); a target is filled from the consumer's parameters: declare ${name} in the definition's Parameters.`)
      }
      throw invalid(`${where} holds ${m[0]}, but the definition declares no parameter ${name} (${declared.length ? `declared: ${declared.join(', ')}` : 'it declares none'}); declare it in Parameters or fix the name.`)
    }
    if (spec.Type !== 'string' && spec.Type !== 'number') throw invalid(`${where} holds ${m[0]}, but ${name} is a ${spec.Type}: only a string or number parameter fills a path.`)
  }
  const filled = template.replace(PLACEHOLDER, (_, key: string) => SAMPLE[key] ?? 'p')
  if (filled.includes('{') || filled.includes('}')) throw invalid(`${where} has a { or } that opens or closes no placeholder: use ${PLACEHOLDERS}.`)
  const segments = filled.split('/')
  const bad = segments.find((s) => !isValidSegment(s))
  if (bad !== undefined) {
    throw invalid(
      `${where} ${JSON.stringify(template)} is not a node path once filled in: ${bad === '' ? 'it has a leading, trailing or double /' : `its segment ${JSON.stringify(bad)} is not allowed`} (a path's segments use the ASCII letters a-z and A-Z, digits and _ . @ -, and are not "." or "..").`,
    )
  }
}

/** The edit distance of two short names (insertions, deletions, substitutions), case-insensitive. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase()
  const y = b.toLowerCase()
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j)
  for (let i = 1; i <= x.length; i++) {
    const row = [i]
    for (let j = 1; j <= y.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1))
    prev = row
  }
  return prev[y.length]!
}

/**
 * [CTX58] A node type a definition names: a type name, and not a misspelling of a known one
 * ("Documnt", "document": within two edits of Document, or the same but for case). A type no
 * module registers and unlike every known one is taken: modules bring types of their own.
 */
export function checkNodeType(nodeType: string, where: string): void {
  try {
    nodeTypeDef(nodeType)
  } catch {
    throw new WeftError('contextual_unknown_node_type', `${where} ${JSON.stringify(nodeType)} is not a node type name (letters, digits, _ and ., starting with a letter).`)
  }
  const known = knownNodeTypes()
  if (known.includes(nodeType)) return
  const near = known.find((k) => distance(k, nodeType) <= (Math.min(k.length, nodeType.length) >= 5 ? 2 : 1))
  if (near) throw new WeftError('contextual_unknown_node_type', `${where} ${JSON.stringify(nodeType)} is not a known node type: did you mean ${near}? (Known: ${known.join(', ')}.)`)
}
