import { describe, expect, it } from 'vitest'
import { statusWords } from '../../web/components/status-words.js'
import type { SyncStatus } from '../../web/sync/index.js'

const base: SyncStatus = { kind: 'saved', online: true, trouble: null, lastSyncedAt: 1, pending: 0, refused: 0, final: null }
const down = { code: 1006, reason: '', count: 4 }

describe('[WEB12] the status words', () => {
  it('[WEB12] connected: never an earlier failure beside "All changes synced"', () => {
    expect(statusWords({ ...base, kind: 'saved' }, down)).toEqual({ kind: 'saved', label: 'All changes synced', trouble: null })
    expect(statusWords({ ...base, kind: 'syncing' }, down).trouble).toBeNull()
  })
  it('[WEB12] the server down stays "cannot be reached" through the retries, in words that fit a server that is down', () => {
    for (const kind of ['unreachable', 'connecting'] as const) {
      const w = statusWords({ ...base, kind }, down)
      expect(w.kind).toBe('unreachable')
      expect(w.trouble).toContain('not answering')
    }
  })
  it('[WEB12] a first drop is "Reconnecting…"; the first connect is "Connecting…"; the device offline is "You are offline"', () => {
    expect(statusWords({ ...base, kind: 'unreachable' }, { code: 1006, reason: '', count: 1 }).label).toBe('Reconnecting…')
    expect(statusWords({ ...base, kind: 'connecting' }, null).label).toBe('Reconnecting…')
    expect(statusWords({ ...base, kind: 'connecting', lastSyncedAt: null }, null).label).toBe('Connecting…')
    expect(statusWords({ ...base, kind: 'offline', online: false }, down)).toEqual({ kind: 'offline', label: 'You are offline', trouble: null })
  })
})
