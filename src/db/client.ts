/**
 * The database behind one interface, two drivers (DATABASE_URL, docs/configuration.md):
 * PostgreSQL through postgres.js for a postgres:// URL, embedded PGlite otherwise
 * (persisted in a directory, or in memory for `memory://`). The same migrations run on both.
 *
 * On PostgreSQL every statement of the pool and of the request log goes through DATABASE_URL,
 * which may be a pooler in transaction mode (PgBouncer `pool_mode = transaction`): nothing here
 * relies on a session outliving a transaction there (no SET, no session advisory lock, no named
 * prepared statement unless DATABASE_PREPARED_STATEMENTS is on). What needs a session of its
 * own, migrations and every LISTEN, uses DATABASE_DIRECT_URL (default: DATABASE_URL). With
 * REQUEST_LOG_DATABASE_URL the request log's rows are on a database of their own, with migrations
 * of their own (src/db/request-log-database.ts).
 */
import { openPglite } from './pglite.ts';
import { openPostgres } from './postgres.ts';
import { openRequestLogDatabase } from './request-log-database.ts';

import type { DatabaseHandle, RequestLogDatabase } from './database.ts';

export type { DatabaseHandle, Db, RequestLogDatabase } from './database.ts';

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
  /**
   * REQUEST_LOG_DATABASE_URL: the request log's own database, migrated at open
   * (src/db/request-log-database.ts). PostgreSQL only.
   */
  requestLogUrl?: string | undefined;
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const url = options.databaseUrl;
  if (!url || url === 'memory://') {
    if (options.requestLogUrl !== undefined)
      throw new Error('a request log database needs a PostgreSQL DATABASE_URL');
    return openPglite(url === 'memory://' ? undefined : options.pgliteDir);
  }
  const waitMs = options.poolWaitMs ?? 2000;
  const handle = await openPostgres({
    url,
    directUrl: options.directUrl ?? url,
    max: options.poolSize ?? 10,
    waitMs,
    prepare: options.preparedStatements ?? options.directUrl === undefined,
    searchTimeoutMs: options.searchTimeoutMs,
  });
  if (options.requestLogUrl === undefined) return handle;
  let requestLog: RequestLogDatabase;
  try {
    requestLog = await openRequestLogDatabase(options.requestLogUrl, waitMs);
  } catch (err) {
    await handle.close();
    throw err;
  }
  return {
    ...handle,
    requestLog,
    migrationsApplied: (handle.migrationsApplied ?? 0) + requestLog.migrationsApplied,
    close: async (graceMs) => {
      await Promise.all([handle.close(graceMs), requestLog.close(graceMs)]);
    },
  };
}
