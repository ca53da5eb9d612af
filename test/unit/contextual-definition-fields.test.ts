import { describe, expect, it } from 'vitest'
import { CONTEXTUAL_DEFINITION_FIELDS } from '../../shared/contextual.js'
import type { JsonObject } from '../../shared/json.js'
import { compileDefinition } from '../../sync-server/contextual/definition.js'

const DEFINITION: JsonObject = {
  Operation: 'triage',
  Events: { NodeTypes: ['Document'], Kinds: ['Created'], PathPrefix: 'Ops/inbox' },
  Parameters: { Urgency: { Type: 'string' } },
  Hydration: {},
  Reactions: { note: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  Limits: { LeaseSeconds: 30, MaxInFlight: 1, MaxAttempts: 1 },
}

/** Each field changed to another valid value. */
const CHANGED: JsonObject = {
  Operation: 'triage2',
  Events: { NodeTypes: ['Document'], Kinds: ['Updated'], PathPrefix: 'Ops/inbox' },
  Parameters: { Urgency: { Type: 'number' } },
  Hydration: { doc: { Get: '{event.path}' } },
  Reactions: { note2: { Command: 'patch', Target: '{event.path}', Parameters: { Note: { Type: 'string' } } } },
  Limits: { LeaseSeconds: 60, MaxInFlight: 1, MaxAttempts: 1 },
}

describe('the fields of a definition', () => {
  it('[WEB134] the app asks for exactly the fields the server\'s definition hash covers', () => {
    const hash = compileDefinition(DEFINITION).hash
    for (const field of CONTEXTUAL_DEFINITION_FIELDS) {
      expect(compileDefinition({ ...DEFINITION, [field]: CHANGED[field]! }).hash, field).not.toBe(hash)
    }
    // A field outside the definition leaves the hash as it is.
    expect(compileDefinition({ ...DEFINITION, Description: 'what it is for' }).hash).toBe(hash)
  })
})
