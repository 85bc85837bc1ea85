/**
 * The embedded database: PGlite, persisted in a directory (one process at a time:
 * pglite-lock.ts) or in memory, migrated by Drizzle's PGlite migrator. One connection, so no
 * pool, no gate and no stats.
 */
import type { PGlite } from '@electric-sql/pglite';
import { migrationsFolder, pingDb, schema, type DatabaseHandle, type Db } from './database.ts';
import { acquirePgliteLock } from './pglite-lock.ts';

export async function openPglite(dataDir: string | undefined): Promise<DatabaseHandle> {
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
