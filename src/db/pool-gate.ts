/**
 * The PostgreSQL pool's gate and counters (DATABASE_POOL_WAIT_MS, the operator's metrics): what
 * postgres.js does not do or report about its pool. PGlite has no pool and no gate.
 */
import { POOL_TIMEOUT } from './errors.ts';

/**
 * What postgres.js does not report about its pool, counted around it: `busy` is statements
 * outside a transaction that were sent and not yet answered plus open transactions (each holds
 * one connection until it ends; statements beyond `size` are pipelined, not waiting); `errors`
 * is statements the driver answered with an error. `waiting` comes from the gate.
 */
export interface PoolCounters {
  size: number;
  busy: number;
  errors: number;
  /** Statements and transactions that waited poolWaitMs for a connection and were refused. */
  timeouts: number;
}

export interface PoolStats extends PoolCounters {
  /** Statements and transactions held at the gate now, waiting for a connection. */
  waiting: number;
}

/** A statement or transaction refused after waiting DATABASE_POOL_WAIT_MS for a connection. */
export class PoolTimeoutError extends Error {
  readonly code = POOL_TIMEOUT;
  constructor(waitMs: number) {
    super(`no database connection free within ${waitMs} ms`);
  }
}

/**
 * postgres.js sends a statement at once on an idle connection, or pipelined behind others on a
 * busy one (up to its pipeline depth each), and queues it without bound once every connection is
 * full or held by a transaction; a transaction waits for a connection of its own. The gate
 * admits exactly what postgres.js would send or begin now (no throughput lost: the pipelining
 * stays) and holds the rest, first come first served, at most `waitMs` each: a request that
 * cannot be served in time is answered 503 with Retry-After instead of joining an ever longer
 * queue in which, under overload, every request ends up waiting.
 */
export const PIPELINE_DEPTH = 100; // postgres.js's max_pipeline default
/**
 * Behind a transaction-mode pooler (a DATABASE_DIRECT_URL is set) the gate admits one statement
 * per connection, so postgres.js, which sends a statement to an idle or unopened connection
 * before it pipelines one behind another, never pipelines. PgBouncer 1.18 hands its server
 * connection back to the pool at the first ReadyForQuery: a statement pipelined behind another
 * was answered to nobody, and its request waited for ever (test/listings/concurrency.test.ts
 * through PgBouncer hung so). postgres.js's own max_pipeline cannot say this: at 1 it still
 * sends a second statement, and a transaction's BEGIN sent so fails (UNSAFE_TRANSACTION).
 */
export const POOLED_PIPELINE_DEPTH = 1;

export class ConnectionGate {
  private statements = 0;
  private transactions = 0;
  private readonly queue: { transaction: boolean; grant: () => void; timer: NodeJS.Timeout }[] = [];

  constructor(
    private readonly size: number,
    private readonly waitMs: number,
    private readonly stats: PoolCounters,
    private readonly pipelineDepth: number,
  ) {}

  get waiting(): number {
    return this.queue.length;
  }

  /** Takes a place now if there is one (release() it), and nobody is waiting before. */
  tryAcquire(transaction: boolean): boolean {
    if (this.queue.length > 0 || !this.fits(transaction)) return false;
    this.take(transaction);
    return true;
  }

  /** Resolves once a place is this caller's (release() it), or rejects after waitMs. */
  acquire(transaction: boolean): Promise<void> {
    if (this.tryAcquire(transaction)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const entry = {
        transaction,
        grant: () => {
          clearTimeout(entry.timer);
          this.take(transaction);
          resolve();
        },
        timer: setTimeout(() => {
          this.queue.splice(this.queue.indexOf(entry), 1);
          this.stats.timeouts += 1;
          reject(new PoolTimeoutError(this.waitMs));
          this.admit();
        }, this.waitMs),
      };
      this.queue.push(entry);
    });
  }

  release(transaction: boolean): void {
    if (transaction) this.transactions -= 1;
    else this.statements -= 1;
    this.admit();
  }

  /** A transaction needs a connection of its own; statements share the others, pipelined. */
  private fits(transaction: boolean): boolean {
    if (transaction) return this.transactions < this.size;
    return this.statements < (this.size - this.transactions) * this.pipelineDepth;
  }

  private take(transaction: boolean): void {
    if (transaction) this.transactions += 1;
    else this.statements += 1;
  }

  /** Lets the waiting in, in order, while the first of them fits. */
  private admit(): void {
    while (this.queue.length > 0 && this.fits(this.queue[0]!.transaction))
      this.queue.shift()!.grant();
  }
}
