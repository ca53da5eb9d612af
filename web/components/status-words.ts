import type { SyncStatus } from '../sync/index.js'

/** The socket's failures in a row (MuxConnection.trouble$): what the status says while it is not connected. */
export interface Failures {
  code: number
  reason: string
  count: number
}

export type ShownKind = 'offline' | 'unreachable' | 'connecting' | 'reconnecting' | 'syncing' | 'saved' | 'final'

export interface StatusWords {
  kind: ShownKind
  label: string
  /** Why it is not connected, when the socket keeps failing the same way; never while connected. */
  trouble: string | null
}

/** Close codes a person can be told about in words (the server is down is not "the connection keeps dropping"). */
function troubleText(code: number, reason: string): string {
  if (code === 1009) return 'the server closes the connection: a change is larger than it accepts'
  if (code === 1006) return 'the server is not answering (it may be down or restarting); trying again'
  if (code === 1011 || code === 1012 || code === 1013) return 'the server keeps failing (it may be restarting); trying again'
  if (code === 1001) return 'the server is restarting; trying again'
  if (code === 1002 || code === 1003) return 'the server does not understand this app version; reload the page'
  return `the server keeps closing the connection (${code}${reason ? `: ${reason}` : ''}); trying again`
}

const LABELS: Record<ShownKind, string> = {
  offline: 'You are offline',
  unreachable: 'The server cannot be reached',
  connecting: 'Connecting…',
  reconnecting: 'Reconnecting…',
  syncing: 'Syncing…',
  saved: 'All changes synced',
  final: 'Disconnected',
}

/**
 * What the status bar says. Four situations are told apart: this device is offline (the
 * browser has no network); the server cannot be reached (the network is there, the socket
 * fails: down, restarting, or refusing), which stays said through the retries instead of
 * flickering with each attempt; reconnecting (a connection just dropped, first try); and
 * connected. Once a socket is open, no earlier failure is shown: a clean restart ends with
 * "All changes synced" alone.
 */
export function statusWords(s: SyncStatus, failures: Failures | null): StatusWords {
  const connected = s.kind === 'saved' || s.kind === 'syncing'
  let kind: ShownKind = s.kind
  if (s.kind === 'connecting' && failures) kind = failures.count >= 2 ? 'unreachable' : 'reconnecting'
  else if (s.kind === 'connecting' && s.lastSyncedAt !== null) kind = 'reconnecting'
  else if (s.kind === 'unreachable' && failures && failures.count < 2) kind = 'reconnecting'
  const trouble = !connected && kind === 'unreachable' && failures && failures.count >= 2 ? troubleText(failures.code, failures.reason) : null
  return { kind, label: LABELS[kind], trouble }
}
