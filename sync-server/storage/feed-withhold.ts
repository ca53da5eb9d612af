import type { ChangeRecord, NodePath } from '../../shared/index.js'
import { descendantRange } from './query.js'

/**
 * [FEED5] A Denied assignment that stops standing at `scope` (deleted, lifted, or carried away by a
 * move, a trash or a delete of its subtree): the change records of `scope` and below, up to and
 * including the commit that ends it, are withheld from `subject` (a user id or a group path) for
 * good. While it stood, today's access check kept them from that subject; once it is gone, today's
 * access at those paths no longer says so, and the records would show the history of a subtree
 * the subject was never allowed to see (decision 0014).
 */
export interface FeedWithhold {
  scope: NodePath
  subject: string
  /**
   * The assignment's own path. Its records marked as where this Denied began standing for `subject`
   * (`changes.denied_from`, [FEED8]) bound the withholding from below: a record older than the last
   * such mark was not kept from the subject by this Denied. Absent, or no mark (a Denied carried in
   * by a move, or begun before the column): every record up to the end is withheld, as before.
   */
  assignment?: NodePath
}

/** A change record as storage holds it: `withheld` names the subjects it is withheld from (never sent to a client). */
export interface StoredChange extends ChangeRecord {
  withheld?: readonly string[]
}

/** Subjects are user ids and group paths: no newline, so one separates them in the column. */
const SEPARATOR = '\n'

/**
 * [FEED7] A record withheld from everyone: what a record's list becomes once it would pass
 * `WITHHELD_MAX_CHARS`. Without a bound, an Admin who made and deleted Denied assignments for
 * ever new subjects grew every record of the scope by a subject each time (16 MB over 1,500 records
 * after 60 rounds, and every feed page reads the column). Withholding more is safe: the feed is a
 * sync aid, a client reads a node's current state.
 */
export const WITHHELD_FROM_ALL = '*'
export const WITHHELD_MAX_CHARS = 2048

/**
 * Whether a record's withheld list names one of `subjects` (a user and their groups), or everyone
 * ([FEED7]). The one reading of the list: the feed ([FEED5]) and a consumer's intake ([CTX54]).
 */
export function withheldFrom(withheld: readonly string[] | undefined, subjects: readonly string[]): boolean {
  return withheld !== undefined && withheld.some((s) => s === WITHHELD_FROM_ALL || subjects.includes(s))
}

/** The `withheld` column as storage reads it: absent when it is null. */
export function withheldOf(column: string | null | undefined): { withheld?: readonly string[] } {
  return column ? { withheld: column.split(SEPARATOR) } : {}
}

/** The statements' parameters: the subject, `scope` itself, and `[scope/, scope0)`, its descendants. */
export interface WithholdBinding {
  subject: string
  scope: string
  from: string
  to: string
  through: number
  assignment: string | null
}

export function withholdBinding(w: FeedWithhold, through: number): WithholdBinding {
  const [from, to] = descendantRange(w.scope)
  return { subject: w.subject, scope: w.scope, from, to, through, assignment: w.assignment ?? null }
}

/** PostgreSQL's positional form of the same parameters. */
export function withholdParams(w: FeedWithhold, through: number): [string, string, string, string, number, string | null] {
  const b = withholdBinding(w, through)
  return [b.subject, b.scope, b.from, b.to, b.through, b.assignment]
}

/**
 * [FEED8] A commit that makes a Denied begin standing for `subject` (an assignment created Denied,
 * patched to Denied, or given another subject while Denied) marks its own record: the lower bound
 * of the withholding its end will make. One assignment, one subject: the column holds one name.
 */
export const SQLITE_DENIED_FROM = 'UPDATE changes SET denied_from = ? WHERE version = ?'
export const POSTGRES_DENIED_FROM = 'UPDATE changes SET denied_from = $1 WHERE version = $2'

/**
 * SQLite: paths are BINARY (bytewise), so `changes_path (path, version)` gives both ranges. A
 * subject already listed is not listed again. [FEED8] Records older than the Denied's last start
 * mark at its assignment's path are left alone (the same index finds the mark); the bound is no
 * index condition (`+version`), so the path ranges stay what the statement reads by.
 */
export const SQLITE_WITHHOLD = `UPDATE changes SET withheld = CASE WHEN withheld IS NULL THEN @subject
 WHEN length(withheld) + length(@subject) >= ${WITHHELD_MAX_CHARS} THEN '${WITHHELD_FROM_ALL}' ELSE withheld || char(10) || @subject END
 WHERE (path = @scope OR (path >= @from AND path < @to)) AND version <= @through
 AND +version >= COALESCE((SELECT max(d.version) FROM changes d WHERE d.path = @assignment AND d.version <= @through AND d.denied_from = @subject), 0)
 AND (withheld IS NULL OR (withheld <> '${WITHHELD_FROM_ALL}' AND instr(char(10) || withheld || char(10), char(10) || @subject || char(10)) = 0))`

/**
 * PostgreSQL: `changes.path` has the database's collation, whose order need not be bytewise, so
 * the prefix range is compared in "C" (exact whatever the database's collation), read through
 * `changes_path_c` ([FEED6]; without it the whole log was scanned under the version counter's lock).
 * [FEED8]'s lower bound is written `version + 0`: as a plain bound the planner read the log by its
 * primary key from the bound (0 when the Denied has no mark: the whole log again).
 */
export const POSTGRES_WITHHOLD = `UPDATE changes SET withheld = CASE WHEN withheld IS NULL THEN $1::text
 WHEN length(withheld) + length($1::text) >= ${WITHHELD_MAX_CHARS} THEN '${WITHHELD_FROM_ALL}' ELSE withheld || chr(10) || $1::text END
 WHERE (path COLLATE "C" = $2 OR (path COLLATE "C" >= $3 AND path COLLATE "C" < $4)) AND version <= $5
 AND (version + 0) >= COALESCE((SELECT max(d.version) FROM changes d WHERE d.path = $6::text AND d.version <= $5 AND d.denied_from = $1::text), 0)
 AND (withheld IS NULL OR (withheld <> '${WITHHELD_FROM_ALL}' AND strpos(chr(10) || withheld || chr(10), chr(10) || $1::text || chr(10)) = 0))`
