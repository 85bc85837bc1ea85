/**
 * PostgreSQL's migrations, applied at start under a lock: the files drizzle-kit wrote
 * (readMigrationFiles, Drizzle's published reader), bookkept in Drizzle's own table
 * (drizzle.__drizzle_migrations: PGlite's start, through Drizzle's migrator, reads the same), run
 * through postgres.js's documented API only.
 */
import { readMigrationFiles } from 'drizzle-orm/migrator';
import postgres from 'postgres';
import { migrationsFolder } from './database.ts';
import { projectFile } from '../project-files.ts';

/** Where one database's migrations are read from and bookkept, and the lock they run under. */
export interface MigrationSet {
  /** drizzle-kit's output folder. */
  folder: string;
  /** The bookkeeping table, in the "drizzle" schema. */
  table: string;
  /** Serialises migrations of several instances starting at once on one PostgreSQL. */
  lockId: number;
}

/** The primary's (DATABASE_URL): drizzle/, Drizzle's default table. */
const PRIMARY: Omit<MigrationSet, 'folder'> = { table: '__drizzle_migrations', lockId: 7_424_001 };

/**
 * The request log's own database (REQUEST_LOG_DATABASE_URL): drizzle/request-log/ (from
 * drizzle.request-log.config.ts), bookkept in a table of its own, so a database that holds both
 * by mistake never reads one's history as the other's.
 */
export const REQUEST_LOG_MIGRATIONS: MigrationSet = {
  folder: projectFile('drizzle', 'request-log'),
  table: '__drizzle_request_log_migrations',
  lockId: 7_424_002,
};

/**
 * Migrates on a connection of its own to the direct URL, in one transaction that first takes
 * a transaction-level advisory lock: instances starting at once take turns, and the lock ends
 * with the transaction whatever happens to the connection. (A session-level lock released by
 * closing the connection leaked behind a transaction-mode pooler: the server connection went
 * back to the pool still holding it, and every later start waited for ever.) The steps are
 * Drizzle's migrator's (drizzle-orm/pg-core dialect `migrate`): every migration newer than the
 * last one recorded runs, statement by statement, and is recorded, all in that transaction.
 */
export async function migrate(
  directUrl: string,
  options: postgres.Options<{}>,
  /** Another folder of drizzle-kit's layout: the tests of a migration start from the one before. */
  folder = migrationsFolder,
  { table, lockId }: Omit<MigrationSet, 'folder'> = PRIMARY,
): Promise<number> {
  const migrations = readMigrationFiles({ migrationsFolder: folder });
  const bookkeeping = `"drizzle"."${table}"`;
  // Not prepared: without DATABASE_DIRECT_URL this may be a pooler as well.
  const migrator = postgres(directUrl, { ...options, prepare: false, max: 1 });
  let applied = 0;
  try {
    await migrator.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${lockId})`;
      await tx.unsafe('create schema if not exists "drizzle"');
      await tx.unsafe(
        `create table if not exists ${bookkeeping}
           (id serial primary key, hash text not null, created_at bigint)`,
      );
      const [last] = await tx.unsafe<{ created_at: string }[]>(
        `select created_at from ${bookkeeping} order by created_at desc limit 1`,
      );
      for (const migration of migrations) {
        if (last && Number(last.created_at) >= migration.folderMillis) continue;
        for (const statement of migration.sql) await tx.unsafe(statement);
        await tx.unsafe(`insert into ${bookkeeping} (hash, created_at) values ($1, $2)`, [
          migration.hash,
          migration.folderMillis,
        ]);
        applied += 1;
      }
    });
  } finally {
    await migrator.end({ timeout: 5 });
  }
  return applied;
}
