/**
 * The request log on a database of its own (REQUEST_LOG_DATABASE_URL, docs/operations.md
 * "Request log database"), to take its write volume off the primary (docs/scaling.md, "Beyond
 * one primary"). Its own migrations (drizzle/request-log/, under a lock of their own), then two
 * postgres.js clients: the readers' pool and the writer's connection.
 *
 * Nothing on it depends on a session, and its statements are neither prepared nor pipelined, so
 * the URL may be PostgreSQL itself or a pooler in any mode (PgBouncer's transaction mode
 * included): the migration lock is transaction-level, the partition keeper's lease is a row,
 * synchronous_commit is set per transaction. Preparing would save little here: a batch every
 * 50 ms at most, and a page of the portal now and then.
 */
import postgres from 'postgres';
import type { RequestLogDatabase } from './database.ts';
import { migrate, REQUEST_LOG_MIGRATIONS } from './migrations.ts';
import { POOLED_PIPELINE_DEPTH } from './pool-gate.ts';
import { connectionDb, gatedDb, PRIMARY_SESSION_OPTIONS } from './postgres.ts';

/**
 * The readers' pool: the portal's log pages and `admin app logs` (a person's page views), and
 * the partition keeper, whose DETACH ... CONCURRENTLY may wait on a long transaction: with two,
 * pages are still read meanwhile. Nothing grows with traffic here (the writes have their own
 * connection), so no variable sets it.
 */
const READERS = 2;

export async function openRequestLogDatabase(
  url: string,
  /** DATABASE_POOL_WAIT_MS: a page waits this long for a reader, then answers 503. */
  waitMs: number,
): Promise<RequestLogDatabase> {
  const options = { ...PRIMARY_SESSION_OPTIONS, prepare: false };
  const migrationsApplied = await migrate(
    url,
    options,
    REQUEST_LOG_MIGRATIONS.folder,
    REQUEST_LOG_MIGRATIONS,
  );
  const readers = postgres(url, { ...options, max: READERS });
  const writer = postgres(url, { ...options, max: 1 });
  return {
    db: gatedDb(readers, READERS, waitMs, POOLED_PIPELINE_DEPTH).db,
    writerDb: connectionDb(writer),
    migrationsApplied,
    close: async (graceMs = 5000) => {
      await Promise.all([readers, writer].map((sql) => sql.end({ timeout: graceMs / 1000 })));
    },
  };
}
