import type { Logger } from 'pino'
import {
  LEGACY_SCHEDULED_ACTIONS_PARENT,
  SUBSCRIPTIONS_PARENT,
  SYSTEM,
  principalName,
  readChangeKind,
  readContinuationType,
  readSubscriptionStatus,
  readTriggerType,
  type EnumRead,
  type JsonObject,
  type JsonValue,
  type MeshNode,
  type NodePath,
} from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/index.js'
import { RECONCILE_PAGE, delayMs, realClock, type CancelTimer, type Clock } from '../kit/index.js'
import { idFromPath } from './model.js'

/** The kit's one backoff (a legacy node carries no retry fields: the count is this process's). */
const RETRY = { baseMs: 500, maxMs: 60_000, maxAttempts: Infinity }

/**
 * Back-compat: legacy `Admin/ScheduledAction/{id}` nodes (the NodeChange + GrantSpaceAccess case,
 * same field names) become `Admin/EventSubscription/{id}`; the legacy node is removed only after
 * the new one is durable. A failed migration releases its id and is retried with back-off, so
 * no in-flight invite is dropped. An EventSubscription that already exists at the id wins (a
 * half-done earlier migration, or a newer write): migration never overwrites it.
 *
 * [SUB14] Only what the system wrote migrates (the old invite code wrote these nodes as system):
 * the migrated subscription is written by the system, so one a person wrote would act with
 * whatever its content claims (an Editor of `Admin` naming a space's Admin as CreatedBy). A
 * person's node at that path is refused: removed, with a warning naming its writer.
 */
export class LegacyMigrator {
  private readonly inFlight = new Set<string>()
  private readonly retries = new Map<string, { attempt: number; cancel: CancelTimer }>()
  private stopped = false

  constructor(
    private readonly nodes: NodeApi,
    private readonly log: Logger,
    private readonly clock: Clock = realClock,
  ) {}

  /** Pages by path (a migrated node leaves the parent, so the next page starts after the last seen). */
  async migrateAll(): Promise<void> {
    let after: string | undefined
    for (;;) {
      const page = await this.nodes.query(SYSTEM, { parent: LEGACY_SCHEDULED_ACTIONS_PARENT as NodePath, limit: RECONCILE_PAGE, ...(after !== undefined ? { after } : {}) })
      await Promise.all(page.map((node) => this.migrateOne(node)))
      if (page.length < RECONCILE_PAGE) break
      after = page[page.length - 1]!.path
    }
  }

  /** Fire-and-forget form for the live path. */
  migrate(node: MeshNode): void {
    void this.migrateOne(node)
  }

  stop(): void {
    this.stopped = true
    for (const r of this.retries.values()) r.cancel()
    this.retries.clear()
  }

  private async migrateOne(legacy: MeshNode): Promise<boolean> {
    const id = idFromPath(legacy.path)
    if (this.stopped || this.inFlight.has(id)) return false
    this.inFlight.add(id)
    try {
      if (!isSystemMade(legacy)) {
        await this.nodes.update(SYSTEM, legacy.path, (current) => (current && !isSystemMade(current) ? null : undefined), 'engine')
        this.retries.delete(id)
        this.log.warn({ id, writer: legacy.createdBy }, 'legacy ScheduledAction written by a person was not migrated (removed)')
        return false
      }
      const target = `${SUBSCRIPTIONS_PARENT}/${id}` as NodePath
      await this.nodes.update(SYSTEM, target, (current) => {
        if (current) return undefined
        return { nodeType: 'EventSubscription', name: legacy.name || id, content: toSubscriptionContent(id, legacy) }
      }, 'engine')
      // Only a system-made node goes: one a person re-created at the path meanwhile is refused next time.
      await this.nodes.update(SYSTEM, legacy.path, (current) => (current && isSystemMade(current) ? null : undefined), 'engine')
      this.retries.delete(id)
      this.log.info({ id }, 'migrated legacy ScheduledAction to EventSubscription')
      return true
    } catch (err) {
      const attempt = (this.retries.get(id)?.attempt ?? 0) + 1
      const delay = delayMs(RETRY, attempt)
      this.log.warn({ err, id, attempt, retryInMs: delay }, 'legacy ScheduledAction migration failed; will retry')
      if (!this.stopped) {
        const cancel = this.clock.setTimeout(() => {
          void this.nodes.get(SYSTEM, legacy.path).then(
            (node) => {
              // Gone meanwhile (migrated by another instance, or deleted): nothing to retry.
              if (!node) this.retries.delete(id)
              return node ? this.migrateOne(node) : undefined
            },
            (e) => this.log.warn({ err: e, id }, 'legacy migration retry could not read the node'),
          )
        }, delay)
        this.retries.set(id, { attempt, cancel })
      }
      return false
    } finally {
      this.inFlight.delete(id)
    }
  }
}

/** Written by the system principal (the node's metadata, which no content can change). */
function isSystemMade(node: MeshNode): boolean {
  return node.createdBy === principalName(SYSTEM)
}

/**
 * The subscription a system-made legacy node becomes. Its CreatedBy is the user the system
 * recorded there (the inviter, re-checked when it fires, [SUB13]); none: the system's own.
 */
export function toSubscriptionContent(id: string, legacy: MeshNode): JsonObject {
  const c = legacy.content
  return {
    ...c,
    Id: typeof c.Id === 'string' && c.Id ? c.Id : id,
    // The legacy shape only ever meant "grant when a matching node is created".
    TriggerType: byName(readTriggerType, c.TriggerType ?? 'NodeChange'),
    TriggerKind: byName(readChangeKind, c.TriggerKind ?? 'Created'),
    ContinuationType: byName(readContinuationType, c.ContinuationType ?? 'GrantSpaceAccess'),
    Status: byName(readSubscriptionStatus, c.Status ?? 'Pending'),
    CreatedAt: c.CreatedAt ?? legacy.createdAt,
    CreatedBy: typeof c.CreatedBy === 'string' && c.CreatedBy !== '' ? c.CreatedBy : null,
    MigratedFrom: legacy.path,
  }
}

/** Enums persist by name: a legacy number this build knows becomes its name; anything else is kept as text. */
function byName(read: (raw: unknown) => EnumRead<string>, raw: JsonValue): JsonValue {
  const r = read(raw)
  return r.known ? r.value : typeof raw === 'number' ? String(raw) : raw
}
