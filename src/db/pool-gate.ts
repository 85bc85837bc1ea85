/**
 * The PostgreSQL pool's gate and counters (DATABASE_POOL_WAIT_MS, the operator's metrics): what
 * postgres.js does not do or report about its pool. PGlite has no pool and no gate.
 */
import { DATABASE_DOWN, isConnectionError, POOL_TIMEOUT } from './errors.ts';

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
 * stays) and holds the rest, first come first served, at most `waitMs` in all for one request
 * (Passage): a request that
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

/**
 * A statement or transaction refused, or given up, because the server has not answered within
 * DATABASE_POOL_WAIT_MS while the pool is down (its last word from the server was a connection
 * failure): a 503 with Retry-After, as an unreachable server is.
 */
export class DatabaseDownError extends Error {
  readonly code = DATABASE_DOWN;
  constructor(waitMs: number) {
    super(`the database has not answered within ${waitMs} ms (connection lost)`);
  }
}

/**
 * While the pool is down, one statement or transaction at a time probes the server, at most one
 * every PROBE_EVERY_MS: 4 connection attempts a second per pool however many requests arrive
 * (postgres.js would open every connection of the pool for them, each retrying on its own
 * backoff), and recovery is seen within a quarter second of the server answering again.
 */
const PROBE_EVERY_MS = 250;

/** A statement or transaction sent to postgres.js and not answered yet. */
interface Running {
  /** performance.now() past which, while the pool is down, its caller is failed. */
  deadline: number;
  /** Fails the caller now (the driver's promise is left to settle, its place kept until then). */
  abandon(err: Error): void;
}

/**
 * What a request's statements have waited for the database so far (its scope,
 * src/lib/request-scope.ts): one DATABASE_POOL_WAIT_MS is the whole request's, so a request
 * whose credential read waited through an outage does not wait as long again for its write.
 */
export interface WaitAccount {
  databaseWaitedMs: number;
  /** An outage has touched one of its statements, on any pool (Passage.cutAt). */
  databaseOutageSeen: boolean;
}

/**
 * How long past its request's deadline a statement an outage touched may still run once let
 * through (Passage.cutAt): the recovering server's first answers (a fresh connection, statements
 * prepared again, a commit waiting for a new synchronous standby) get this much, and the request
 * is answered within DATABASE_POOL_WAIT_MS + 0.5 s (issue #60) with room for its own work.
 */
const OVERRUN_MS = 350;

/**
 * One statement's or transaction's way through the gate, from the moment it asks (issue #60): it
 * may wait what its request has left of DATABASE_POOL_WAIT_MS (all of it outside a request), and
 * at its end charges the request what it waited: its time at the gate, and its whole time if an
 * outage touched it (the pool down when it asked, or going down before it was answered). A
 * statement answered in the normal course charges nothing, however long it ran.
 *
 * A statement an outage touched before it was let through (its pool down, or an earlier
 * statement of its request on any pool: the replica's, then the primary's) is given up on at
 * `cutAt` whatever its pool's state: while the pool is down at its deadline (ConnectionGate), and
 * in any case OVERRUN_MS after it. A failover's first connection to a primary that is gone hangs
 * until its connect timeout before any failure tells the pool, and the first commits on a new
 * primary may wait for its synchronous standby: either way the request's answer comes within its
 * one wait. A transaction is given up on only before its BEGIN is answered.
 */
export class Passage {
  readonly askedAt = performance.now();
  /** The most it may wait, in ms. */
  readonly budgetMs: number;
  private grantedAt: number | undefined;
  private readonly outagesAtAsk: number;
  private readonly downAtAsk: boolean;
  private readonly outageSeenBefore: boolean;

  constructor(
    private readonly gate: ConnectionGate,
    private readonly account: WaitAccount | undefined,
  ) {
    this.budgetMs = gate.budgetOf(account);
    this.outageSeenBefore = account?.databaseOutageSeen === true;
    this.outagesAtAsk = gate.outages;
    this.downAtAsk = gate.isDown;
  }

  /** Its request's deadline: while the pool is down it is given up on then. */
  get deadline(): number {
    return this.askedAt + this.budgetMs;
  }

  /**
   * When it is given up on whatever the pool's state, if an outage has touched it or its request
   * by now (asked once it has its place); undefined when none has.
   */
  cutAt(): number | undefined {
    const touched =
      this.outageSeenBefore || this.downAtAsk || this.gate.outages !== this.outagesAtAsk;
    return touched ? this.deadline + OVERRUN_MS : undefined;
  }

  /** It has its place at the gate: at once (`askedAt`), or now, after waiting for it. */
  granted(at = performance.now()): void {
    this.grantedAt = at;
  }

  /** It is done (answered, failed, refused or given up on): its request is charged its wait. */
  ended(): void {
    if (!this.account) return;
    const touched = this.downAtAsk || this.gate.outages !== this.outagesAtAsk;
    const until = touched || this.grantedAt === undefined ? performance.now() : this.grantedAt;
    this.account.databaseWaitedMs += until - this.askedAt;
    if (touched) this.account.databaseOutageSeen = true;
  }
}

/**
 * Through an outage (a failover, a restart: issue #60) the gate also knows whether the server is
 * answering. A connection failure (refused, closed, terminated, timed out) puts the pool down;
 * any answer from the server, rows or an SQL error, puts it up. While down, the waiting are let
 * in one probe at a time (PROBE_EVERY_MS), and whatever has waited DATABASE_POOL_WAIT_MS, at the
 * gate or at the driver, is failed with DatabaseDownError (503): a request never waits out an
 * outage, and none fails while the server answers.
 */
export class ConnectionGate {
  private statements = 0;
  private transactions = 0;
  private readonly queue: { transaction: boolean; grant: () => void; timer: NodeJS.Timeout }[] = [];
  private down = false;
  /** How many times the pool has gone down (Passage: whether an outage touched a statement). */
  private downs = 0;
  private probing = false;
  /** The probe let in while down, once it runs (track). */
  private probe: Running | undefined;
  private probedAt = -Infinity;
  private readonly running = new Set<Running>();
  /** While down: lets the next probe in when its turn comes, and gives up on the overdue. */
  private outageTimer: NodeJS.Timeout | undefined;

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

  /** What a request that has waited `account` so far may still wait (all of waitMs outside one). */
  budgetOf(account: WaitAccount | undefined): number {
    return account ? Math.max(0, this.waitMs - account.databaseWaitedMs) : this.waitMs;
  }

  get outages(): number {
    return this.downs;
  }

  /**
   * Resolves once a place is this caller's (release() it), or rejects after `budgetMs` (its
   * request's part of waitMs: Passage).
   */
  acquire(transaction: boolean, budgetMs = this.waitMs): Promise<void> {
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
          reject(
            this.down ? new DatabaseDownError(this.waitMs) : new PoolTimeoutError(this.waitMs),
          );
          this.admit();
        }, budgetMs),
      };
      this.queue.push(entry);
    });
  }

  release(transaction: boolean): void {
    if (transaction) this.transactions -= 1;
    else this.statements -= 1;
    this.admit();
  }

  /** Whether the pool is down now (its last word from the server was a connection failure). */
  get isDown(): boolean {
    return this.down;
  }

  /**
   * A statement or transaction let through is running from now until `done()`; while the pool
   * is down it is failed through `abandon` once its `deadline` (performance.now()) has passed:
   * its request's part of DATABASE_POOL_WAIT_MS from when it came to the gate (Passage), so its
   * wait at the gate counts.
   */
  track(deadline: number, abandon: (err: Error) => void): { done(): void } {
    const entry: Running = { deadline, abandon };
    this.running.add(entry);
    if (this.probing && !this.probe) this.probe = entry;
    return { done: () => this.running.delete(entry) };
  }

  /** What the server said of a statement or transaction let through: answered, or failed. */
  outcome(err?: unknown): void {
    if (err === undefined || !isConnectionError(err)) {
      if (!this.down) return;
      this.down = this.probing = false;
      this.probe = undefined;
      clearInterval(this.outageTimer);
      this.outageTimer = undefined;
      this.admit();
      return;
    }
    this.probing = false;
    this.probe = undefined;
    if (this.down) return;
    this.down = true;
    this.downs += 1;
    this.outageTimer = setInterval(() => this.duringOutage(), PROBE_EVERY_MS / 5);
    this.outageTimer.unref();
    this.duringOutage();
  }

  private duringOutage(): void {
    const now = performance.now();
    for (const entry of this.running) {
      if (entry.deadline > now) continue;
      this.running.delete(entry);
      entry.abandon(new DatabaseDownError(this.waitMs));
    }
    // A probe given up on (above) is no longer one: the next may go.
    if (this.probe && !this.running.has(this.probe)) {
      this.probing = false;
      this.probe = undefined;
    }
    this.admit();
  }

  /** A transaction needs a connection of its own; statements share the others, pipelined. */
  private fits(transaction: boolean): boolean {
    if (this.down && (this.probing || performance.now() - this.probedAt < PROBE_EVERY_MS))
      return false;
    if (transaction) return this.transactions < this.size;
    return this.statements < (this.size - this.transactions) * this.pipelineDepth;
  }

  private take(transaction: boolean): void {
    if (this.down) {
      this.probing = true;
      this.probe = undefined;
      this.probedAt = performance.now();
    }
    if (transaction) this.transactions += 1;
    else this.statements += 1;
  }

  /** Lets the waiting in, in order, while the first of them fits. */
  private admit(): void {
    while (this.queue.length > 0 && this.fits(this.queue[0]!.transaction))
      this.queue.shift()!.grant();
  }
}
