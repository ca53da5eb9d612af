import pg from 'pg'
import type { Lease, LeaseStore } from '../engines/index.js'

const SCHEMA = `
CREATE TABLE IF NOT EXISTS engine_leases (
  name text PRIMARY KEY,
  holder text,
  fence bigint NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL DEFAULT 'epoch'
)`

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

  async acquire(name: string, holder: string, ttlMs: number): Promise<Lease | null> {
    const r = await this.pool.query<{ holder: string; fence: string; expires_ms: string }>(
      `INSERT INTO engine_leases AS l (name, holder, fence, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
       ON CONFLICT (name) DO UPDATE SET holder = $2, fence = l.fence + 1, expires_at = now() + $3 * interval '1 millisecond'
       WHERE l.expires_at <= now() OR l.holder IS NULL
       RETURNING holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms`,
      [name, holder, ttlMs],
    )
    return lease(r.rows[0])
  }

  async renew(name: string, held: Lease, ttlMs: number): Promise<Lease | null> {
    const r = await this.pool.query<{ holder: string; fence: string; expires_ms: string }>(
      `UPDATE engine_leases SET expires_at = now() + $4 * interval '1 millisecond'
       WHERE name = $1 AND holder = $2 AND fence = $3 AND expires_at > now()
       RETURNING holder, fence, (extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms`,
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
