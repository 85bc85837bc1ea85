/**
 * PostgreSQL through postgres.js: the pool (behind its gate, pool-gate.ts), the request log's
 * connection, the search pool and the LISTEN connection, each a postgres.js client with the
 * session options below; migrations first (migrations.ts).
 */
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres, { type Sql } from 'postgres';
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
            observe(
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
 * Counts a statement in `stats` once postgres.js runs it (a Query runs on its first then(),
 * through handle()): busy from then until answered (when it takes a pool connection of its
 * own), and its error. On the pool it is handed to postgres.js only once the gate lets it
 * through; refused, the query fails with the gate's PoolTimeoutError, never having been sent.
 * The settle handlers use Promise's own then, which neither runs the query again nor makes a
 * Query (its species is Promise).
 */
function observe<T extends object>(
  query: T,
  stats: PoolCounters,
  gate: ConnectionGate | undefined,
): T {
  const running = query as unknown as {
    handle: () => Promise<void>;
    reject: (err: unknown) => void;
  };
  const handle = running.handle.bind(running);
  let started = false;
  running.handle = async () => {
    if (started) return handle();
    started = true;
    if (!gate) {
      Promise.prototype.then.call(running, undefined, () => {
        stats.errors += 1;
      });
      return handle();
    }
    stats.busy += 1;
    // The common case, a free connection, without a turn of the event loop.
    if (!gate.tryAcquire(false)) {
      try {
        await gate.acquire(false);
      } catch (err) {
        stats.busy -= 1;
        running.reject(err);
        return;
      }
    }
    const settled = () => {
      stats.busy -= 1;
      gate.release(false);
    };
    Promise.prototype.then.call(running, settled, () => {
      settled();
      stats.errors += 1;
    });
    return handle();
  };
  return query;
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
