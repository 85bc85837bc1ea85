/**
 * A streaming replica (hot standby) of the PostgreSQL server behind DATABASE_URL, for reads that
 * may be a little behind (DATABASE_REPLICA_URL, docs/operations.md "Read replica"). Who may read
 * behind is src/access.ts's (mayReadBehind); this file only says whether the replica may serve
 * such a read now, and runs it there or on the primary.
 *
 * Its lag is measured by WAL position, not by time: `now() - pg_last_xact_replay_timestamp()`
 * grows while the primary is idle, although the replica then has everything. Every POLL_MS the
 * primary's `pg_current_wal_lsn()` is read and remembered with the time it was first seen, then
 * the replica's `pg_last_wal_replay_lsn()`; the lag is the age of the oldest primary position the
 * replica has not replayed yet (0 when it has replayed all it was shown). Between polls the age
 * keeps growing, so a replica that stopped replaying is skipped once the bound is up, not at the
 * next poll. A poll that fails marks it down.
 */
import postgres, { type Sql } from 'postgres';
import type { Db } from './database.ts';
import type { PoolStats } from './pool-gate.ts';
import { gatedDb, SESSION_OPTIONS } from './postgres.ts';
import { isConnectionError, isPoolTimeout, isStatementTimeout } from './errors.ts';

/** How often the lag is measured. */
const POLL_MS = 1000;
/** A poll taking longer than this marks the replica down (a stalled server answers nothing). */
const POLL_TIMEOUT_MS = 2000;
/**
 * Primary positions remembered at most (one per poll that saw the primary move). Once full, the
 * newest is moved forward instead of adding one: its time stays the older one, so the lag is
 * never under-stated.
 */
const HISTORY_MAX = 120;

/** ok: reads that may be behind go to the replica; lagging or down: to the primary. */
export type ReplicaState = 'ok' | 'lagging' | 'down';
/** Why a read that could have gone to the replica went to the primary. */
export type FallbackReason = 'lagging' | 'down' | 'error';

export interface ReplicaStats {
  state: ReplicaState;
  /** The lag now, ms; null while down (unknown). */
  lagMs: number | null;
  /** Reads the replica served. */
  reads: number;
  fallbacks: Readonly<Record<FallbackReason, number>>;
  pool: Readonly<PoolStats>;
}

interface Log {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface ReplicaOptions {
  url: string;
  /** DATABASE_URL: where the primary's WAL position is read. */
  primaryUrl: string;
  maxLagMs: number;
  poolSize: number;
  /** DATABASE_POOL_WAIT_MS: then the read is tried on the primary. */
  poolWaitMs: number;
  /**
   * SEARCH_TIMEOUT_MS: the pool's connections start with it as their statement_timeout. The
   * replica serves only reads that are bounded by design (feed pages, listings by id,
   * searches): the safety net a search has on the primary's search pool, for all of them.
   */
  statementTimeoutMs?: number | undefined;
  log: Log;
}

/** A pg_lsn's text (`16/B374D848`) as a number. */
function lsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export class Replica {
  /** The replica's pool (read-only sessions), for the repositories that read from it. */
  readonly db: Db;
  private readonly client: Sql;
  /**
   * One connection to each server for the poll, outside the pools: a pool saturated by requests
   * (the primary's, when the replica is skipped) must not make the replica look down.
   */
  private readonly watch: { primary: Sql; replica: Sql };
  private readonly poolStats: () => Readonly<PoolStats>;
  private readonly maxLagMs: number;
  private readonly log: Log;
  /** Primary positions not yet replayed, oldest first, with when each was first seen. */
  private history: { lsn: bigint; at: number }[] = [];
  private state: ReplicaState | 'starting' = 'starting';
  /** Why it is down (the poll's or a read's error), for the log line. */
  private downReason = '';
  /** Which server did not answer: the primary's poll fails first while the primary is out. */
  private unreachable: 'primary' | 'replica' = 'replica';
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private closed = false;
  private reads = 0;
  private pollsDone = 0;
  private readonly fallbacks: Record<FallbackReason, number> = { lagging: 0, down: 0, error: 0 };

  constructor(options: ReplicaOptions) {
    this.maxLagMs = options.maxLagMs;
    this.log = options.log;
    // The primary's session options (SESSION_OPTIONS), read-only, so a URL that names a primary by
    // mistake cannot write, and a shorter connect timeout: half the request's one wait (at most
    // 2 s), since a read waiting on it falls back to the primary only then, with what is left.
    const sessions = {
      ...SESSION_OPTIONS,
      connect_timeout: Math.min(2, Math.max(options.poolWaitMs, 500) / 2000),
      connection: { ...SESSION_OPTIONS.connection, default_transaction_read_only: true },
    };
    const timeout =
      options.statementTimeoutMs === undefined
        ? {}
        : { statement_timeout: options.statementTimeoutMs };
    this.client = postgres(options.url, {
      ...sessions,
      connection: { ...sessions.connection, ...timeout },
      max: options.poolSize,
    });
    // Unprepared: one short statement a second, whatever pooler sits in front.
    this.watch = {
      primary: postgres(options.primaryUrl, { ...sessions, max: 1, prepare: false }),
      replica: postgres(options.url, { ...sessions, max: 1, prepare: false }),
    };
    const pool = gatedDb(this.client, options.poolSize, options.poolWaitMs);
    this.db = pool.db;
    this.poolStats = pool.stats;
  }

  /** Measures once (the state is known when it resolves; never throws), then every POLL_MS. */
  async start(): Promise<void> {
    await this.poll();
    if (this.closed) return;
    this.timer = setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  /** Ends its pools: statements running then get `graceMs` (default 5 s) to finish. */
  async close(graceMs = 5000): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.all(
      [this.client, this.watch.primary, this.watch.replica].map((sql) =>
        sql.end({ timeout: graceMs / 1000 }),
      ),
    );
  }

  /**
   * Runs a read that may be behind: `onReplica` while the replica is within its bound, else
   * `onPrimary`; a replica read that fails is run again on the primary, in the same request,
   * unless it lost its connection while the primary is unreachable too. Both must only read
   * (no rule of access in them: a denial would be asked twice).
   */
  async read<T>(onReplica: () => Promise<T>, onPrimary: () => Promise<T>): Promise<T> {
    const state = this.current(Date.now());
    if (state !== 'ok') {
      this.fallbacks[state] += 1;
      return onPrimary();
    }
    try {
      const result = await onReplica();
      this.reads += 1;
      return result;
    } catch (err) {
      // A search out of its SEARCH_TIMEOUT_MS would run as long on the primary: its 503 stands.
      if (isStatementTimeout(err)) throw err;
      // The primary unreachable as well (the lag poll failed on it meanwhile: a failover): the
      // read has had its wait, and the primary would make it wait as long again (issue #60: a
      // request answers within DATABASE_POOL_WAIT_MS), so its 503 stands.
      if (isConnectionError(err) && this.state === 'down' && this.unreachable === 'primary')
        throw err;
      this.fallbacks.error += 1;
      // Unreachable: skip it until a poll reaches it. A full pool, a conflict with recovery or a
      // relation not replayed yet are this read's alone.
      if (isConnectionError(err) && !isPoolTimeout(err)) this.down(err);
      return onPrimary();
    }
  }

  stats(): ReplicaStats {
    const state = this.current(Date.now());
    return {
      state,
      lagMs: state === 'down' ? null : this.lagMs(Date.now()),
      reads: this.reads,
      fallbacks: { ...this.fallbacks },
      pool: this.poolStats(),
    };
  }

  /** The primary first, then the replica: what the replica has not replayed by then is lag. */
  private async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      const primaryRows = await withTimeout(
        this.watch.primary<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`,
        POLL_TIMEOUT_MS,
      ).catch((err: unknown) => {
        if (!this.closed) this.down(err, 'primary');
        return null;
      });
      if (!primaryRows) return;
      const [primary] = primaryRows;
      this.seen(lsn(primary!.lsn), Date.now());
      const [replica] = await withTimeout(
        this.watch.replica<{ lsn: string | null }[]>`select pg_last_wal_replay_lsn()::text as lsn`,
        POLL_TIMEOUT_MS,
      );
      // null: not in recovery, so not a standby (a primary, or a logical replica).
      if (!replica?.lsn) throw new Error('DATABASE_REPLICA_URL is not a streaming replica');
      this.replayed(lsn(replica.lsn));
      if (this.closed) return;
      const lag = this.lagMs(Date.now());
      // Back only well within the bound, so a replica hovering at it does not flap.
      const ok = this.state === 'ok' ? lag <= this.maxLagMs : lag <= this.maxLagMs / 2;
      this.enter(ok ? 'ok' : 'lagging', lag);
    } catch (err) {
      if (!this.closed) this.down(err);
    } finally {
      this.polling = false;
      this.pollsDone += 1;
    }
  }

  /** Polls finished so far, worked or failed (tests wait on them). */
  get polls(): number {
    return this.pollsDone;
  }

  private seen(position: bigint, at: number): void {
    const newest = this.history[this.history.length - 1];
    if (newest && newest.lsn >= position) return;
    if (newest && this.history.length >= HISTORY_MAX) newest.lsn = position;
    else this.history.push({ lsn: position, at });
  }

  private replayed(position: bigint): void {
    let done = 0;
    while (done < this.history.length && this.history[done]!.lsn <= position) done += 1;
    if (done > 0) this.history = this.history.slice(done);
  }

  private lagMs(now: number): number {
    const oldest = this.history[0];
    return oldest ? Math.max(0, now - oldest.at) : 0;
  }

  /** The state now: between polls a replica in use turns lagging once its lag passes the bound. */
  private current(now: number): ReplicaState {
    if (this.state === 'starting') return 'down';
    if (this.state === 'ok') {
      const lag = this.lagMs(now);
      if (lag > this.maxLagMs) this.enter('lagging', lag);
    }
    return this.state;
  }

  private down(err: unknown, unreachable: 'primary' | 'replica' = 'replica'): void {
    this.downReason = err instanceof Error ? err.message : String(err);
    // Down for another server's sake is a change the operator must read (issue #60 item 5).
    if (this.state === 'down' && this.unreachable !== unreachable) this.state = 'starting';
    this.unreachable = unreachable;
    this.enter('down', null);
  }

  /** One log line per change of state, never per poll or per request. */
  private enter(state: ReplicaState, lagMs: number | null): void {
    if (state === this.state) return;
    this.state = state;
    const bound = { max_lag_ms: this.maxLagMs };
    if (state === 'ok')
      this.log.info(
        { event: 'db_replica_up', lag_ms: lagMs, ...bound },
        'the read replica is in use: anonymous reads are served by it',
      );
    else if (state === 'lagging')
      this.log.warn(
        { event: 'db_replica_lagging', lag_ms: lagMs, ...bound },
        'the read replica is behind its bound: anonymous reads go to the primary until it catches up',
      );
    else if (this.unreachable === 'replica')
      this.log.warn(
        {
          event: 'db_replica_down',
          unreachable: 'replica',
          err: { message: this.downReason },
          ...bound,
        },
        'the read replica is unreachable: anonymous reads go to the primary until it answers',
      );
    else
      this.log.warn(
        {
          event: 'db_replica_down',
          unreachable: 'primary',
          err: { message: this.downReason },
          ...bound,
        },
        'the primary (DATABASE_URL) is unreachable, so the read replica cannot be measured: ' +
          'anonymous reads wait for the primary, as every request does',
      );
  }
}

/**
 * Where reads run: `primary` (repositories over the primary's pool), or `replica`'s source (the
 * same repositories over the replica's pool) for a read that may be behind while it is usable.
 * The one place that decides; services only say whether a read may be behind.
 */
export class ReadRouting<S> {
  constructor(
    private readonly primary: S,
    private readonly replicated: { replica: Replica; source: S } | null = null,
  ) {}

  run<T>(mayBeBehind: boolean, read: (source: S) => Promise<T>): Promise<T> {
    const replicated = this.replicated;
    if (!mayBeBehind || !replicated) return read(this.primary);
    return replicated.replica.read(
      () => read(replicated.source),
      () => read(this.primary),
    );
  }
}
