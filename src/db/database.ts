/**
 * What every part of the database layer shares: the one boundary every
 * statement crosses (`Connection`), the `Db` repositories take over it, and the handle
 * openDatabase (client.ts) returns for either driver.
 */
import { sql, type Query } from 'drizzle-orm';
import { drizzle, type PgRemoteDatabase } from 'drizzle-orm/pg-proxy';
import { projectFile } from '../project-files.ts';
import type { PoolStats } from './pool-gate.ts';

/**
 * The database boundary: every statement of the process, whoever wrote it (Drizzle's query
 * builder, a raw `sql` template, a RenderedSql), is one call of `query`, and every transaction
 * one of `transaction`. Two implementations, each over its driver's documented API: PostgreSQL
 * through postgres.js behind the pool's gate (gated-client.ts: `unsafe`, `begin`, `savepoint`)
 * and PGlite (pglite.ts: `query`, `transaction`). Both read timestamps, dates and intervals as
 * PostgreSQL's text (rows.ts isoTimestamp) and take JSON parameters as text.
 */
export interface Connection {
  /** A statement's rows: as objects, or (`arrays`) as arrays in the order of its columns. */
  query(text: string, params: unknown[], arrays: boolean): Promise<unknown[]>;
  /**
   * `work` in one transaction on a connection held until it ends; inside one already, in a
   * savepoint. Committed when `work` resolves, rolled back when it throws.
   */
  transaction<T>(work: (tx: Connection) => Promise<T>): Promise<T>;
}

/**
 * A database or a transaction, as repositories take it: Drizzle's query builder and `execute`
 * over a Connection (Drizzle's pg-proxy driver, whose documented contract is exactly "you run
 * the text and parameters, Drizzle builds and maps"), with the Connection's own transactions
 * (the proxy driver has none) and `rendered` for a statement rendered once (rows.ts RenderedSql).
 */
export type Db = Omit<PgRemoteDatabase, 'transaction'> & {
  /** `work` in one transaction (a savepoint inside one), given the transaction's Db. */
  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T>;
  /** A statement's text and parameters as rendered already: its rows as objects. */
  rendered(query: Query): Promise<unknown[]>;
};

/** Drizzle over `connection`; a transaction's Db is Drizzle over the transaction's Connection. */
export function drizzleOn(connection: Connection): Db {
  const db = drizzle(async (text, params, method) => ({
    rows: await connection.query(text, params, method === 'all'),
  }));
  // The proxy driver's own transaction() only throws: this Db's is the Connection's.
  return Object.assign(db, {
    transaction: <T>(work: (tx: Db) => Promise<T>) =>
      connection.transaction((tx) => work(drizzleOn(tx))),
    rendered: (query: Query) => connection.query(query.sql, query.params, false),
  });
}

/** drizzle-kit's output, applied at start by either driver. */
export const migrationsFolder = projectFile('drizzle');

export interface DatabaseHandle {
  db: Db;
  driver: 'postgres' | 'pglite';
  /**
   * Migrations this open applied (0: the database was up to date), for the start-up line
   * (src/server.ts); the request log's own database counted in too.
   */
  migrationsApplied?: number;
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
  /** NOTIFY `channel` with `payload`, a statement of the pool (behind its gate). */
  notify(channel: string, payload: string): Promise<void>;
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
  /**
   * REQUEST_LOG_DATABASE_URL: the request log's own database (src/db/request-log-database.ts).
   * Absent: the log is on `db` (and `backgroundDb`) with everything else.
   */
  requestLog?: RequestLogDatabase;
  /** The pool's state (PostgreSQL only: PGlite has no pool), for the operator's metrics. */
  stats?: () => Readonly<PoolStats>;
  /**
   * Ends the pools: statements running then get `graceMs` (default 5 s) to finish, then their
   * connections are closed.
   */
  close(graceMs?: number): Promise<void>;
}

/** The request log's own database, opened and migrated (src/db/request-log-database.ts). */
export interface RequestLogDatabase {
  /** Reads (the portal's log pages, `admin app logs`) and the partition keeper: a small pool. */
  db: Db;
  /** The log's batch writes: one connection of its own, as the primary's `backgroundDb`. */
  writerDb: Db;
  /** Migrations this open applied to it. */
  migrationsApplied: number;
  /** Ends both as DatabaseHandle.close ends the primary's. */
  close(graceMs?: number): Promise<void>;
}

export async function notifyDb(db: Db, channel: string, payload: string): Promise<void> {
  await db.execute(sql`select pg_notify(${channel}, ${payload})`);
}

export async function pingDb(db: Db): Promise<boolean> {
  try {
    await db.execute(sql`select 1`);
    return true;
  } catch {
    return false;
  }
}
