/**
 * The database behind one interface, two drivers (CONTRACT §7):
 * PostgreSQL through postgres.js for a postgres:// URL, embedded PGlite otherwise
 * (persisted in a directory, or in memory for `memory://`). The same migrations run on both.
 */
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { acquirePgliteLock } from './pglite-lock.ts';
import * as schema from './schema.ts';

export type Schema = typeof schema;
/** A database or a transaction: repositories accept either. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface DatabaseHandle {
  db: Db;
  driver: 'postgres' | 'pglite';
  /** true when a trivial query answers. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  pgliteDir: string;
  /** postgres.js pool size. */
  poolSize?: number;
}

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));
/** Serialises migrations of several instances starting at once on one PostgreSQL. */
const MIGRATION_LOCK_ID = 7_424_001;

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const url = options.databaseUrl;
  if (url && url !== 'memory://') return openPostgres(url, options.poolSize ?? 10);
  return openPglite(url === 'memory://' ? undefined : options.pgliteDir);
}

async function openPostgres(url: string, max: number): Promise<DatabaseHandle> {
  // Migrate on a dedicated single connection so the session-level advisory lock covers it.
  // Sessions run in UTC so timestamptz text is always +00 (src/db/rows.ts isoTimestamp).
  const options = { onnotice: () => {}, connect_timeout: 10, connection: { TimeZone: 'UTC' } };
  const migrator = postgres(url, { ...options, max: 1 });
  try {
    await migrator`select pg_advisory_lock(${MIGRATION_LOCK_ID})`;
    await migratePostgres(drizzlePostgres({ client: migrator, schema }), { migrationsFolder });
  } finally {
    await migrator.end({ timeout: 5 });
  }
  const client = postgres(url, { ...options, max });
  const db = drizzlePostgres({ client, schema }) as unknown as Db;
  return {
    db,
    driver: 'postgres',
    ping: () => pingDb(db),
    close: () => client.end({ timeout: 5 }),
  };
}

async function openPglite(dataDir: string | undefined): Promise<DatabaseHandle> {
  const release = dataDir ? acquirePgliteLock(dataDir) : () => {};
  let client: PGlite;
  try {
    client = await PGlite.create(dataDir ? { dataDir } : {});
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
