/**
 * [WEB61] What a person reads for a node type or a field key: words, never the identifier
 * ("ContextualSubscription" → "Contextual subscription", "FullName" → "Full name"). One pair of
 * functions for every place a type or a key is shown (the type badge, the children, the Create
 * menu, the field labels, find results), so the same thing is never named two ways.
 */

/** Types whose word is not their identifier split into words. */
const TYPE_WORDS: Readonly<Record<string, string>> = {
  ActivityLog: 'Run',
  AccessAssignment: 'Access',
  ThreadMessage: 'Message',
  User: 'Profile',
}

/** "ContextualSubscription" → "Contextual subscription"; "HTMLBody" → "HTML body"; "Title", "My notes" unchanged. */
function identifierWords(id: string): string {
  // Only identifiers are split: a key someone typed with spaces ("my notes") is already words.
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(id)) return id
  const words = id.match(/[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+/g)
  if (!words || words.length < 2) return id
  return words.map((w, i) => (i === 0 || w.length > 1 && w === w.toUpperCase() ? w : w.toLowerCase())).join(' ')
}

/** The words for a node type: the badge, the children list, the Create menu. */
export function typeLabel(nodeType: string): string {
  return Object.prototype.hasOwnProperty.call(TYPE_WORDS, nodeType) ? TYPE_WORDS[nodeType]! : identifierWords(nodeType)
}

/** The words for a field key: the label next to its value, and in messages about it. */
export function fieldLabel(key: string): string {
  return identifierWords(key)
}
