import Database from 'better-sqlite3'
import { join } from 'node:path'

/**
 * A real storage failure in a running server's SQLite database (`weft.db` in its data directory):
 * a trigger, added from another connection, aborts the server's writes to `table` (`on`: INSERT,
 * UPDATE or DELETE) of rows whose `path` is `path`. The server meets it as it would a full disk or
 * a broken table: its transaction fails, and its answer (a 500 `internal`, a room closed) is its
 * own. `heal()` drops the trigger; the server needs no restart.
 */
export function failWrites(dataDir: string, table: 'nodes' | 'node_updates', on: readonly ('INSERT' | 'UPDATE' | 'DELETE')[], path: string): { heal(): void } {
  const db = new Database(join(dataDir, 'weft.db'))
  db.pragma('busy_timeout = 10000')
  const names = on.map((op) => `weft_test_fault_${table}_${op.toLowerCase()}_${Math.random().toString(36).slice(2, 8)}`)
  const quoted = `'${path.replaceAll("'", "''")}'`
  on.forEach((op, i) => {
    const row = op === 'DELETE' ? 'OLD' : 'NEW'
    db.exec(`CREATE TRIGGER ${names[i]} BEFORE ${op} ON ${table} WHEN ${row}.path = ${quoted} BEGIN SELECT RAISE(ABORT, 'injected storage failure (test)'); END;`)
  })
  return {
    heal() {
      if (!db.open) return
      for (const n of names) db.exec(`DROP TRIGGER IF EXISTS ${n}`)
      db.close()
    },
  }
}
