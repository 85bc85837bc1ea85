/**
 * The database behind one interface, two drivers (DATABASE_URL, docs/configuration.md):
 * PostgreSQL through postgres.js for a postgres:// URL, embedded PGlite otherwise
 * (persisted in a directory, or in memory for `memory://`). The same migrations run on both.
 *
 * On PostgreSQL every statement of the pool and of the request log goes through DATABASE_URL,
 * which may be a pooler in transaction mode (PgBouncer `pool_mode = transaction`): nothing here
 * relies on a session outliving a transaction there (no SET, no session advisory lock, no named
 * prepared statement unless DATABASE_PREPARED_STATEMENTS is on). What needs a session of its
 * own, migrations and every LISTEN, uses DATABASE_DIRECT_URL (default: DATABASE_URL).
 */
import type { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres, { type Sql } from 'postgres';
import { projectFile } from '../project-files.ts';
import { acquirePgliteLock } from './pglite-lock.ts';
import { POOL_TIMEOUT } from './errors.ts';
import * as activitySchema from './activity-schema.ts';
import * as dataSchema from './schema.ts';

/** The one Drizzle schema, kept in two files (schema.ts, activity-schema.ts). */
const schema = { ...dataSchema, ...activitySchema };
type Schema = typeof schema;
/** A database or a transaction: repositories accept either. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface DatabaseHandle {
  db: Db;
  driver: 'postgres' | 'pglite';
  /** true when a trivial query answers. */
  ping(): Promise<boolean>;
  /**
   * LISTENs on `channel` (PostgreSQL: on a connection of its own, outside the pool): `onNotify`
   * for each notification, `onListen` each time the LISTEN takes effect (again after the driver
   * reconnects, when notifications sent meanwhile were lost). Resolves to the unlisten.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onListen: () => void,
  ): Promise<() => Promise<void>>;
  /**
   * PostgreSQL: one connection of its own, outside the pool, for the request log's batch writes
   * (each in a transaction with synchronous_commit off: the log is best effort). A batch is the
   * largest statement this process sends; on the pool, postgres.js pipelines other statements
   * behind whatever a busy connection runs, so every request whose statement landed behind a
   * batch waited for it (and for its commit's WAL flush). Absent (PGlite): the log writes
   * through `db`.
   */
  backgroundDb?: Db;
  /**
   * PostgreSQL reached directly (no DATABASE_DIRECT_URL): a small pool of its own for searches
   * (src/listings/listings-search-repository.ts), whose connections start with their
   * statement_timeout (SEARCH_TIMEOUT_MS), so a search is one statement with its safety net and
   * no transaction around it. Absent (PGlite, or behind a pooler, which passes no such startup
   * parameter: docs/operations.md): searches run on `db`.
   */
  searchDb?: Db;
  /** The pool's state (PostgreSQL only: PGlite has no pool), for the operator's metrics. */
  stats?: () => Readonly<PoolStats>;
  /**
   * Ends the pools: statements running then get `graceMs` (default 5 s) to finish, then their
   * connections are closed.
   */
  close(graceMs?: number): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /**
   * PostgreSQL without a pooler in between (DATABASE_DIRECT_URL): migrations and every LISTEN.
   * Default: databaseUrl.
   */
  directUrl?: string | undefined;
  /**
   * Named prepared statements on the pool and the request log's connection (default: on without
   * a directUrl, as DATABASE_PREPARED_STATEMENTS). Off behind PgBouncer before 1.21, whose
   * transaction mode cannot follow them.
   */
  preparedStatements?: boolean | undefined;
  pgliteDir: string;
  /** postgres.js pool size. */
  poolSize?: number;
  /**
   * The longest a statement or transaction waits for a pool connection (PostgreSQL), ms: then it
   * fails with PoolTimeoutError, which a request answers 503 + Retry-After. Default 2000.
   */
  poolWaitMs?: number;
  /**
   * SEARCH_TIMEOUT_MS: the statement_timeout the search pool's connections start with
   * (DatabaseHandle.searchDb). Unset: searches run on the pool.
   */
  searchTimeoutMs?: number | undefined;
}

const migrationsFolder = projectFile('drizzle');
/**
 * What postgres.js does not report about its pool, counted around it: `busy` is statements
 * outside a transaction that were sent and not yet answered plus open transactions (each holds
 * one connection until it ends; statements beyond `size` are pipelined, not waiting); `errors`
 * is statements the driver answered with an error. `waiting` comes from the gate.
 */
interface PoolCounters {
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
const PIPELINE_DEPTH = 100; // postgres.js's max_pipeline default
/**
 * Behind a transaction-mode pooler (a DATABASE_DIRECT_URL is set) the gate admits one statement
 * per connection, so postgres.js, which sends a statement to an idle or unopened connection
 * before it pipelines one behind another, never pipelines. PgBouncer 1.18 hands its server
 * connection back to the pool at the first ReadyForQuery: a statement pipelined behind another
 * was answered to nobody, and its request waited for ever (test/listings/concurrency.test.ts
 * through PgBouncer hung so). postgres.js's own max_pipeline cannot say this: at 1 it still
 * sends a second statement, and a transaction's BEGIN sent so fails (UNSAFE_TRANSACTION).
 */
const POOLED_PIPELINE_DEPTH = 1;

class ConnectionGate {
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

/** Serialises migrations of several instances starting at once on one PostgreSQL. */
const MIGRATION_LOCK_ID = 7_424_001;

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const url = options.databaseUrl;
  if (url && url !== 'memory://')
    return openPostgres({
      url,
      directUrl: options.directUrl ?? url,
      max: options.poolSize ?? 10,
      waitMs: options.poolWaitMs ?? 2000,
      prepare: options.preparedStatements ?? options.directUrl === undefined,
      searchTimeoutMs: options.searchTimeoutMs,
    });
  return openPglite(url === 'memory://' ? undefined : options.pgliteDir);
}

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

async function openPostgres(at: {
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
 * Migrates on a connection of its own to the direct URL, in one transaction that first takes
 * a transaction-level advisory lock: instances starting at once take turns, and the lock ends
 * with the transaction whatever happens to the connection. (A session-level lock released by
 * closing the connection leaked behind a transaction-mode pooler: the server connection went
 * back to the pool still holding it, and every later start waited for ever.) Drizzle's migrator
 * opens a transaction of its own; inside this one, it becomes a savepoint.
 */
async function migrate(directUrl: string, options: postgres.Options<{}>): Promise<void> {
  // Not prepared: without DATABASE_DIRECT_URL this may be a pooler as well.
  const migrator = postgres(directUrl, { ...options, prepare: false, max: 1 });
  try {
    await migrator.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
      // Drizzle reads (and sets) the client's parsers in `options`, which only the client has.
      const inTransaction = new Proxy(tx, {
        get: (target, property, receiver) =>
          property === 'begin'
            ? target.savepoint
            : property === 'options'
              ? migrator.options
              : Reflect.get(target, property, receiver),
      }) as unknown as Sql;
      await migratePostgres(drizzlePostgres({ client: inTransaction, schema }), {
        migrationsFolder,
      });
    });
  } finally {
    await migrator.end({ timeout: 5 });
  }
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

async function openPglite(dataDir: string | undefined): Promise<DatabaseHandle> {
  // Loaded only for the embedded database: a server on PostgreSQL never pays for PGlite's
  // modules (about 40 MB of its resident memory and part of its start; `npm run bench`).
  const [{ PGlite: Pglite }, { drizzle: drizzlePglite }, { migrate: migratePglite }] =
    await Promise.all([
      import('@electric-sql/pglite'),
      import('drizzle-orm/pglite'),
      import('drizzle-orm/pglite/migrator'),
    ]);
  const release = dataDir ? acquirePgliteLock(dataDir) : () => {};
  let client: PGlite;
  try {
    client = await Pglite.create(dataDir ? { dataDir } : {});
    await client.exec("set time zone 'UTC'");
    await migratePglite(drizzlePglite({ client, schema }), { migrationsFolder });
  } catch (err) {
    release();
    throw err;
  }
  const db = drizzlePglite({ client, schema }) as unknown as Db;
  return {
    db,
    driver: 'pglite',
    ping: () => pingDb(db),
    async listen(channel, onNotify, onListen) {
      // One connection, never lost: the LISTEN takes effect once.
      const unlisten = await client.listen(channel, onNotify);
      onListen();
      return () => unlisten();
    },
    close: async () => {
      try {
        await client.close();
      } finally {
        release();
      }
    },
  };
}

async function pingDb(db: Db): Promise<boolean> {
  try {
    await db.execute(sql`select 1`);
    return true;
  } catch {
    return false;
  }
}
