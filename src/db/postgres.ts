/**
 * PostgreSQL through postgres.js: the pool (behind its gate, pool-gate.ts), the request log's
 * connection, the search pool and the LISTEN connection, each a postgres.js client with the
 * session options below; migrations first (migrations.ts).
 */
import postgres, { type Sql } from 'postgres';
import { drizzleOn, notifyDb, pingDb, type DatabaseHandle, type Db } from './database.ts';
import { gatedConnection } from './gated-client.ts';
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
 * `types` (postgres.js's documented custom types) keeps timestamps, dates and intervals as
 * PostgreSQL's text both ways and takes JSON parameters as the text Drizzle serialized, as the
 * PGlite side does (pglite.ts): the Connection's contract (database.ts).
 */
export const SESSION_OPTIONS = {
  onnotice: () => {},
  types: {
    /** timestamptz, date, time, timestamp, their arrays, numeric[]: text in, text out. */
    text: {
      to: 1184,
      from: [1184, 1082, 1083, 1114, 1182, 1185, 1115, 1231],
      serialize: (value: unknown) => value,
      parse: (value: string) => value,
    },
    /** json and jsonb: parameters arrive serialized; rows parse as postgres.js's default. */
    json: {
      to: 114,
      from: [114, 3802],
      serialize: (value: unknown) => value,
      parse: (value: string): unknown => JSON.parse(value),
    },
  },
  connect_timeout: 10,
  connection: { TimeZone: 'UTC' },
  backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 0.5),
};

/**
 * DATABASE_URL's and DATABASE_DIRECT_URL's sessions: SESSION_OPTIONS on a primary only. In a
 * switchover the old primary restarts as a standby while a load balancer may still route to it
 * for a second or two (HAProxy until its checks mark it down); a session opened there would
 * answer writes with a read-only error and reads from a past state (a long poll's horizon read
 * there cannot see the primary's open writes, so its cursor could pass an event that commits
 * after). postgres.js checks each new session (PostgreSQL's in_hot_standby, reported at startup
 * since 14; else one query) and ends one on a standby: refused as an unreachable server is, a 503
 * with Retry-After, the pool probing until the route leads to a primary (issue #60,
 * test/db/primary-only.test.ts). The replica's sessions (src/db/replica.ts) are not these.
 */
export const PRIMARY_SESSION_OPTIONS = {
  ...SESSION_OPTIONS,
  target_session_attrs: 'primary' as const,
};

/**
 * A pool's connection attempt is given DATABASE_POOL_WAIT_MS (at least half a second), not
 * SESSION_OPTIONS' 10 s: behind a load balancer still routing to a dead server (HAProxy before
 * its checks mark it down) an attempt hangs until its timeout, and so does the request whose
 * statement opened it (issue #60).
 */
const poolConnectTimeout = (waitMs: number) => Math.max(waitMs, 500) / 1000;

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
  const options = { ...PRIMARY_SESSION_OPTIONS, prepare };
  const migrationsApplied = await migrate(directUrl, options);
  const client = postgres(url, { ...options, max, connect_timeout: poolConnectTimeout(waitMs) });
  const { db, stats } = gatedDb(client, max, waitMs, pipeline);
  // No session setting here (a pooler would refuse or drop it): the request log sets
  // synchronous_commit per transaction (src/request-logs/request-logs-repository.ts).
  const background = postgres(url, { ...options, max: 1 });
  const backgroundDb = connectionDb(background);
  // Half the pool's size: searches wait at their own gate (src/listings/search-gate-plugin.ts) well
  // before they could take every connection the rest of the API needs.
  const searchMax = Math.max(1, Math.floor(max / 2));
  const searching =
    searchTimeoutMs !== undefined && directUrl === url
      ? postgres(url, {
          ...options,
          max: searchMax,
          connect_timeout: poolConnectTimeout(waitMs),
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
    migrationsApplied,
    ping: () => pingDb(db),
    notify: (channel, payload) => notifyDb(db, channel, payload),
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
  const db = drizzleOn(gatedConnection(client, stats, gate));
  return { db, stats: () => ({ ...stats, waiting: gate.waiting }) };
}

/**
 * A client of one connection outside every gate (the request log's batch writes, on the primary
 * and on its own database): one writer, so nothing queues on it but its own next batch.
 */
export function connectionDb(client: Sql): Db {
  return drizzleOn(
    gatedConnection(client, { size: 1, busy: 0, errors: 0, timeouts: 0 }, undefined),
  );
}
