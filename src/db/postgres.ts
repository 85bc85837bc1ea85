/**
 * PostgreSQL through postgres.js: the pool (behind its gate, pool-gate.ts), the request log's
 * connection, the search pool and the LISTEN connection, each a postgres.js client with the
 * session options below; migrations first (migrations.ts).
 */
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres, { type PendingQuery, type Row, type Sql } from 'postgres';
import { pingDb, schema, type DatabaseHandle, type Db } from './database.ts';
import { migrate } from './migrations.ts';
import {
  ConnectionGate,
  PIPELINE_DEPTH,
  POOLED_PIPELINE_DEPTH,
  type PoolCounters,
  type PoolStats,
} from './pool-gate.ts';

/**
 * Every postgres.js client's options (the pool's, the request log's, the LISTEN's, the
 * migrator's, a replica's: src/db/replica.ts). Sessions run in UTC so timestamptz text is always
 * +00 (src/db/rows.ts isoTimestamp); TimeZone is one of the startup parameters PgBouncer passes
 * on in transaction mode (it sets it on whichever server connection runs a statement), other
 * settings are not. Reconnection backoff capped at 0.5 s (postgres.js defaults to up to 20 s,
 * shared by the pool): while PostgreSQL is down queued queries fail fast (503), and once it is
 * back the pool reconnects within half a second instead of leaving requests waiting.
 */
export const SESSION_OPTIONS = {
  onnotice: () => {},
  connect_timeout: 10,
  connection: { TimeZone: 'UTC' },
  backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 0.5),
};

export async function openPostgres(at: {
  url: string;
  directUrl: string;
  max: number;
  waitMs: number;
  prepare: boolean;
  searchTimeoutMs: number | undefined;
}): Promise<DatabaseHandle> {
  const { url, directUrl, max, waitMs, prepare, searchTimeoutMs } = at;
  const pipeline = directUrl === url ? PIPELINE_DEPTH : POOLED_PIPELINE_DEPTH;
  // postgres.js prepares its own statements too (fetching types, begin/commit of a
  // transaction) unless told not to here.
  const options = { ...SESSION_OPTIONS, prepare };
  await migrate(directUrl, options);
  const client = postgres(url, { ...options, max });
  const { db, stats } = gatedDb(client, max, waitMs, pipeline);
  // No session setting here (a pooler would refuse or drop it): the request log sets
  // synchronous_commit per transaction (src/request-logs/request-logs-repository.ts).
  const background = postgres(url, { ...options, max: 1 });
  const backgroundDb = drizzlePostgres({
    client: preparing(background, { size: 1, busy: 0, errors: 0, timeouts: 0 }, undefined),
    schema,
  }) as unknown as Db;
  // Half the pool's size: searches wait at their own gate (src/plugins/search-gate.ts) well
  // before they could take every connection the rest of the API needs.
  const searchMax = Math.max(1, Math.floor(max / 2));
  const searching =
    searchTimeoutMs !== undefined && directUrl === url
      ? postgres(url, {
          ...options,
          max: searchMax,
          connection: { ...options.connection, statement_timeout: searchTimeoutMs },
        })
      : undefined;
  const searchDb = searching && gatedDb(searching, searchMax, waitMs, pipeline).db;
  // postgres.js LISTENs on a connection of its own, opened at the first listen(): through a
  // transaction-mode pooler LISTEN succeeds but nothing is ever delivered, so it goes direct.
  // Never prepared: the direct URL may be a pooler too when DATABASE_DIRECT_URL is unset.
  const notifications =
    directUrl === url ? client : postgres(directUrl, { ...options, prepare: false, max: 1 });
  return {
    db,
    backgroundDb,
    ...(searchDb ? { searchDb } : {}),
    driver: 'postgres',
    ping: () => pingDb(db),
    async listen(channel, onNotify, onListen) {
      const { unlisten } = await notifications.listen(channel, onNotify, onListen);
      return unlisten;
    },
    stats,
    close: async (graceMs = 5000) => {
      await Promise.all(
        [...new Set([client, background, notifications, searching])]
          .filter((sql) => sql !== undefined)
          .map((sql) => sql.end({ timeout: graceMs / 1000 })),
      );
    },
  };
}

/**
 * Drizzle runs every query through postgres.js with `prepare: false` (only named queries are
 * prepared), so each statement with parameters costs two round trips (Parse/Describe, then
 * Bind/Execute) and a fresh parse and plan on the server, where planning the feed query takes
 * as long as running it. Prepared (postgres.js's own default), a statement is parsed and
 * planned once per connection and then runs in one round trip: `npm run bench` measures the
 * difference (docs/performance.md). Our statements are a bounded set of texts, so the
 * per-connection cache stays small; postgres.js forgets it on reconnect and re-prepares when
 * a migration invalidates a plan.
 *
 * Except statements whose text starts with PLANNED_PER_RUN: searches beyond the first shapes a
 * process prepares, or whose plan would depend on their values (src/listings/listings-search-
 * repository.ts, mayPrepare); a search's texts are too many shapes to keep all prepared.
 */
export const PLANNED_PER_RUN = '/* planned per run */ ';

function preparing(client: Sql, stats: PoolCounters, gate: ConnectionGate | undefined): Sql {
  const withCallback =
    (run: (...args: unknown[]) => Promise<unknown>) =>
    (...args: unknown[]) => {
      const callback = args.pop() as (sql: Sql) => unknown;
      // A transaction's statements run on the connection it holds: counted once, as the
      // transaction (busy, and one pass through the gate), and each for its errors.
      const begin = () => run(...args, (sql: Sql) => callback(preparing(sql, stats, undefined)));
      if (!gate) return begin();
      stats.busy += 1;
      return gate
        .acquire(true)
        .then(() => begin().finally(() => gate.release(true)))
        .finally(() => {
          stats.busy -= 1;
        });
    };
  return new Proxy(client, {
    get(target, property, receiver) {
      switch (property) {
        case 'unsafe':
          return (query: string, args?: unknown[], options?: object) =>
            new GatedStatement(
              () =>
                target.unsafe(query, args as never[], {
                  ...options,
                  prepare: !query.startsWith(PLANNED_PER_RUN),
                }),
              stats,
              gate,
            );
        // transactions (Drizzle's db.transaction) and their savepoints run on their own client
        case 'begin':
        case 'savepoint':
          return withCallback(
            (target as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[
              property
            ]!.bind(target),
          );
        default:
          return Reflect.get(target, property, receiver);
      }
    },
  });
}

/**
 * A statement as Drizzle gets it from `unsafe`: awaited (rows as objects) or through
 * `.values()` (rows as arrays), the two ways Drizzle's postgres-js session reads a statement.
 * It is counted in `stats` when awaited: busy from then until answered (when it takes a pool
 * connection of its own), and its error. On the pool it is handed to postgres.js (the
 * documented `unsafe`, which sends a statement once awaited) only once the gate lets it
 * through; refused, it fails with the gate's PoolTimeoutError, never having been sent.
 */
class GatedStatement implements PromiseLike<unknown> {
  /** Sent once, however often it is awaited (as a postgres.js query is). */
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly send: () => PendingQuery<Row[]>,
    private readonly stats: PoolCounters,
    private readonly gate: ConnectionGate | undefined,
  ) {}

  values(): Promise<unknown> {
    this.running ??= this.run((query) => query.values());
    return this.running;
  }

  then<A = unknown, B = never>(
    onFulfilled?: ((value: unknown) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.running ??= this.run((query) => query);
    return this.running.then(onFulfilled, onRejected);
  }

  private async run(read: (query: PendingQuery<Row[]>) => PromiseLike<unknown>): Promise<unknown> {
    const { stats, gate } = this;
    if (!gate) return this.answer(read);
    stats.busy += 1;
    // The common case, a free connection, sends without a turn of the event loop.
    if (!gate.tryAcquire(false)) {
      try {
        await gate.acquire(false);
      } catch (err) {
        stats.busy -= 1;
        throw err;
      }
    }
    try {
      return await this.answer(read);
    } finally {
      stats.busy -= 1;
      gate.release(false);
    }
  }

  private async answer(read: (query: PendingQuery<Row[]>) => PromiseLike<unknown>) {
    try {
      return await read(this.send());
    } catch (err) {
      this.stats.errors += 1;
      throw err;
    }
  }
}

/**
 * A postgres.js pool behind its own gate, statements prepared (or planned per run), counted in
 * its stats: the primary's, and a replica's (src/db/replica.ts, always direct: pipelined).
 */
export function gatedDb(
  client: Sql,
  max: number,
  waitMs: number,
  pipelineDepth = PIPELINE_DEPTH,
): { db: Db; stats: () => Readonly<PoolStats> } {
  const stats: PoolCounters = { size: max, busy: 0, errors: 0, timeouts: 0 };
  const gate = new ConnectionGate(max, waitMs, stats, pipelineDepth);
  const db = drizzlePostgres({ client: preparing(client, stats, gate), schema }) as unknown as Db;
  return { db, stats: () => ({ ...stats, waiting: gate.waiting }) };
}
