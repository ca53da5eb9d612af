import pg from 'pg'
import type { Lease, LeaseBusy, LeaseStore } from '../engines/index.js'

const SCHEMA = `
CREATE TABLE IF NOT EXISTS engine_leases (
  name text PRIMARY KEY,
  holder text,
  fence bigint NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL DEFAULT 'epoch'
);
CREATE TABLE IF NOT EXISTS engine_members (
  holder text PRIMARY KEY,
  expires_at timestamptz NOT NULL
)`

/** [SCALE17] The holder the single `engines` row is kept under while partitions are held. */
export const PARTITIONS_HOLDER = '(partitions)'

/**
 * [SCALE17] A rolling upgrade never runs an engine twice. An earlier version runs every engine
 * under the single `engines` lease: while one holds it, no partition lease is taken or renewed.
 * And while partitions are held, that row is kept taken (holder `(partitions)`, expiring with the
 * latest partition lease), so an earlier version cannot take it meanwhile.
 */
const NO_LEGACY_OWNER = `NOT EXISTS (SELECT 1 FROM engine_leases WHERE name = 'engines' AND holder IS NOT NULL AND holder <> '${PARTITIONS_HOLDER}' AND expires_at > now())`

/** A CTE keeping the `engines` row taken for as long as the lease in `source` (its RETURNING) lasts. */
const keepLegacyOut = (source: string) => `keep AS (
  INSERT INTO engine_leases AS k (name, holder, fence, expires_at)
  SELECT 'engines', '${PARTITIONS_HOLDER}', 0, to_timestamp(expires_ms / 1000.0) FROM ${source}
  ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = greatest(k.expires_at, excluded.expires_at)
  WHERE k.holder = '${PARTITIONS_HOLDER}' OR k.holder IS NULL OR k.expires_at <= now())`

function lease(row: { holder: string; fence: string; expires_ms: string } | undefined): Lease | null {
  return row ? { holder: row.holder, fence: Number(row.fence), expiresAt: Number(row.expires_ms) } : null
}

/**
 * [SCALE6] Engine-partition leases in PostgreSQL: one row per partition, each operation one
 * atomic statement, expiry by the database's clock (instances' clocks never compared). The
 * fence rises with every acquire and is never lowered.
 */
export class PgLeaseStore implements LeaseStore {
  private constructor(private readonly pool: pg.Pool) {}

  static async open(connectionString: string): Promise<PgLeaseStore> {
    const pool = new pg.Pool({ connectionString, max: 2 })
    pool.on('error', () => undefined)
    await pool.query(SCHEMA)
    return new PgLeaseStore(pool)
  }

  /**
   * Free means expired or given up (a release sets the expiry to its time), for at least `graceMs`
   * ([SCALE17]). A partition's first acquire inserts its row, grace or not.
   */
  async acquire(name: string, holder: string, ttlMs: number, graceMs = 0): Promise<Lease | LeaseBusy | null> {
    // The row as it was when not taken: when it falls free ([SCALE17]: the next try is then).
    const r = await this.pool.query<{ holder: string; fence: string; expires_ms: string; free_in_ms: string | null }>(
      `WITH taken AS (
         INSERT INTO engine_leases AS l (name, holder, fence, expires_at)
         SELECT $1, $2, 1, now() + $3 * interval '1 millisecond' WHERE ${NO_LEGACY_OWNER}
         ON CONFLICT (name) DO UPDATE SET holder = $2, fence = l.fence + 1, expires_at = now() + $3 * interval '1 millisecond'
         WHERE l.expires_at <= now() - $4 * interval '1 millisecond' AND ${NO_LEGACY_OWNER}
         RETURNING holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms),
       ${keepLegacyOut('taken')}
       SELECT holder, fence, expires_ms, NULL AS free_in_ms FROM taken
       UNION ALL
       SELECT holder, fence, 0, (extract(epoch FROM (expires_at + $4 * interval '1 millisecond' - now())) * 1000)::bigint
       FROM engine_leases WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM taken) AND ${NO_LEGACY_OWNER}`,
      [name, holder, ttlMs, graceMs],
    )
    const row = r.rows[0]
    if (row && row.free_in_ms !== null) return { busy: true, freeInMs: Math.max(0, Number(row.free_in_ms)) }
    return lease(row)
  }

  /**
   * [SCALE17] This instance is alive for `ttlMs` more (a row of `engine_members`); answers how many
   * instances are alive, itself included. One statement.
   */
  async census(holder: string, ttlMs: number): Promise<number> {
    const r = await this.pool.query<{ others: string }>(
      `WITH me AS (
         INSERT INTO engine_members (holder, expires_at) VALUES ($1, now() + $2 * interval '1 millisecond')
         ON CONFLICT (holder) DO UPDATE SET expires_at = EXCLUDED.expires_at RETURNING holder)
       SELECT count(*) AS others FROM engine_members WHERE expires_at > now() AND holder <> $1 AND EXISTS (SELECT 1 FROM me)`,
      [holder, ttlMs],
    )
    return Number(r.rows[0]?.others ?? 0) + 1
  }

  /** [SCALE17] The live holder of each `engines:*` lease, by lease name. */
  async holders(): Promise<Map<string, string>> {
    const r = await this.pool.query<{ name: string; holder: string }>(
      `SELECT name, holder FROM engine_leases WHERE name LIKE 'engines:%' AND holder IS NOT NULL AND expires_at > now()`,
    )
    return new Map(r.rows.map((x) => [x.name, x.holder]))
  }

  /** [SCALE17] This instance stops: the others count it out at once. */
  async leave(holder: string): Promise<void> {
    await this.pool.query('DELETE FROM engine_members WHERE holder = $1', [holder])
  }

  async renew(name: string, held: Lease, ttlMs: number): Promise<Lease | null> {
    const r = await this.pool.query<{ holder: string; fence: string; expires_ms: string }>(
      `WITH renewed AS (
         UPDATE engine_leases SET expires_at = now() + $4 * interval '1 millisecond'
         WHERE name = $1 AND holder = $2 AND fence = $3 AND expires_at > now() AND ${NO_LEGACY_OWNER}
         RETURNING holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms),
       ${keepLegacyOut('renewed')}
       SELECT * FROM renewed`,
      [name, held.holder, held.fence, ttlMs],
    )
    return lease(r.rows[0])
  }

  async release(name: string, held: Lease): Promise<void> {
    await this.pool.query('UPDATE engine_leases SET holder = NULL, expires_at = now() WHERE name = $1 AND holder = $2 AND fence = $3', [name, held.holder, held.fence])
  }

  async close(): Promise<void> {
    await this.pool.end()
  }
}
