import type pg from 'pg'
import { pgPrepared } from './contextual-store.js'

/**
 * [SCALE13] Statements written to one PostgreSQL connection without waiting for each answer (the
 * pool's connections are in node-postgres's pipeline mode): a transaction's statements whose
 * results nothing in between needs go out together, so the transaction costs one round trip per
 * answer it waits for, not one per statement, and holds its locks that much shorter.
 *
 * The server runs them in the order sent. When one fails, the transaction is aborted: every
 * statement after it fails too ("current transaction is aborted") and a COMMIT answers ROLLBACK.
 * `settle` and `failure` name the first failure, the cause, not its echoes.
 */
export class Flight {
  private readonly sent: Promise<pg.QueryResult>[] = []

  constructor(private readonly client: pg.ClientBase) {}

  /** Sends a statement, prepared on the connection (parsed and planned once per connection). */
  send<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.track(this.client.query<R>(pgPrepared(text, values)))
  }

  /** Sends a statement unnamed (one whose text varies, such as a multi-row INSERT of n rows). */
  sendOnce<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.track(this.client.query<R>(text, values))
  }

  /** Statements not answered yet (as far as this flight has looked). */
  get inFlight(): number {
    return this.sent.length
  }

  /** Sends a statement as a simple query (no parameters; may hold several statements). */
  sendSimple(text: string): Promise<pg.QueryResult | pg.QueryResult[]> {
    return this.track(this.client.query(text) as Promise<pg.QueryResult | pg.QueryResult[]>)
  }

  /** Waits for every statement sent so far; throws the first that failed. */
  async settle(): Promise<void> {
    const error = await this.failure()
    if (error !== undefined) throw error
  }

  /** The first failure among the statements sent (after all have answered), or undefined. */
  failure(): Promise<unknown> {
    return firstRejection(this.sent.splice(0))
  }

  /** Waits for the oldest statements until at most `n` are unanswered; throws the first that failed. */
  async drainTo(n: number): Promise<void> {
    const error = await firstRejection(this.sent.splice(0, Math.max(0, this.sent.length - n)))
    if (error === undefined) return
    await this.failure()
    throw error
  }

  private track<T>(p: Promise<T>): Promise<T> {
    // Read by settle/failure; until then a failure is not an unhandled rejection.
    p.catch(() => undefined)
    this.sent.push(p as Promise<never>)
    return p
  }
}

async function firstRejection(promises: readonly Promise<unknown>[]): Promise<unknown> {
  const failed = (await Promise.allSettled(promises)).find((a): a is PromiseRejectedResult => a.status === 'rejected')
  return failed?.reason
}
