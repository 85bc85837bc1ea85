/**
 * What every part of the database layer shares: the Drizzle schema, the `Db` repositories take,
 * the handle openDatabase (client.ts) returns for either driver.
 */
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { projectFile } from '../project-files.ts';
import type { PoolStats } from './pool-gate.ts';
import * as outboxSchema from './outbox-schema.ts';
import * as requestLogSchema from './primary-request-log-schema.ts';
import * as dataSchema from './schema.ts';

/**
 * The one Drizzle schema, kept in three files: the data (schema.ts), the webhook outbox
 * (outbox-schema.ts) and the request log on the primary (primary-request-log-schema.ts).
 */
export const schema = { ...dataSchema, ...outboxSchema, ...requestLogSchema };
type Schema = typeof schema;
/** A database or a transaction: repositories accept either. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

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
