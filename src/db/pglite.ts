/**
 * The embedded database: PGlite, persisted in a directory (one process at a time:
 * pglite-lock.ts) or in memory, migrated by Drizzle's PGlite migrator. One connection, so no
 * pool, no gate and no stats; its Connection (database.ts) is PGlite's documented `query` and
 * `transaction`.
 */
import type { PGlite, PGliteOptions, Transaction } from '@electric-sql/pglite';
import {
  drizzleOn,
  migrationsFolder,
  type Connection,
  notifyDb,
  pingDb,
  type DatabaseHandle,
  type Db,
} from './database.ts';
import { acquirePgliteLock } from './pglite-lock.ts';
import { pgliteTemplate, type PgliteTemplate } from './pglite-template.ts';

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
  // In memory: from the migrated snapshot (pglite-template.ts), made by the first such database.
  const template = dataDir ? undefined : await pgliteTemplate(migrationsFolder);
  let client: PGlite;
  let migrationsApplied = 0;
  try {
    // In memory, the data is in memory already: PostgreSQL's default 128 MB of shared buffers
    // would cache it twice, and zeroing them is most of a start (16 MB: about 0.9 s of CPU,
    // not 1.4 s). A persistent database keeps the default.
    const options = dataDir
      ? { dataDir }
      : { startParams: [...Pglite.defaultStartParams, '-c', 'shared_buffers=16MB'] };
    const loaded = template && (await fromSnapshot(Pglite, template, options));
    client = loaded || (await Pglite.create(options));
    await client.exec("set time zone 'UTC'");
    const recorded = await countMigrations(client);
    await migratePglite(drizzlePglite({ client }), { migrationsFolder });
    migrationsApplied = (await countMigrations(client)) - recorded;
    if (template && !loaded) await template.write(await client.dumpDataDir('gzip'));
  } catch (err) {
    release();
    throw err;
  }
  const db: Db = drizzleOn(new PgliteConnection(client, 0));
  return {
    db,
    driver: 'pglite',
    migrationsApplied,
    ping: () => pingDb(db),
    notify: (channel, payload) => notifyDb(db, channel, payload),
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

/** A database from the template's snapshot; undefined without one, or if PGlite refuses it. */
async function fromSnapshot(
  Pglite: typeof PGlite,
  template: PgliteTemplate,
  options: PGliteOptions,
): Promise<PGlite | undefined> {
  const snapshot = await template.read();
  if (!snapshot) return undefined;
  try {
    return await Pglite.create({ ...options, loadDataDir: snapshot });
  } catch {
    await template.discard();
    return undefined;
  }
}

/** The migrations Drizzle's migrator has recorded in this database (0 before the first). */
async function countMigrations(client: PGlite): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    `select count(*)::int as n from pg_tables
       where schemaname = 'drizzle' and tablename = '__drizzle_migrations'`,
  );
  if (rows[0]?.n !== 1) return 0;
  const recorded = await client.query<{ n: number }>(
    'select count(*)::int as n from drizzle.__drizzle_migrations',
  );
  return recorded.rows[0]?.n ?? 0;
}

const asText = (value: string) => value;
/**
 * Timestamps, dates, intervals and their arrays (and numeric[]) read as PostgreSQL's text, as on
 * PostgreSQL (postgres.ts SESSION_OPTIONS): timestamp, timestamptz, interval, date, numeric[],
 * timestamp[], timestamptz[], interval[], date[].
 */
const PARSERS = Object.fromEntries(
  [1114, 1184, 1186, 1082, 1231, 1115, 1185, 1187, 1182].map((oid) => [oid, asText]),
);
const AS_OBJECTS = { rowMode: 'object', parsers: PARSERS } as const;
const AS_ARRAYS = { rowMode: 'array', parsers: PARSERS } as const;

/**
 * PGlite as a Connection: its one connection, or (`depth` > 0) a transaction on it, in which a
 * nested transaction is a savepoint.
 */
class PgliteConnection implements Connection {
  constructor(
    private readonly client: PGlite | Transaction,
    private readonly depth: number,
  ) {}

  async query(text: string, params: unknown[], arrays: boolean): Promise<unknown[]> {
    return (await this.client.query(text, params, arrays ? AS_ARRAYS : AS_OBJECTS)).rows;
  }

  async transaction<T>(work: (tx: Connection) => Promise<T>): Promise<T> {
    const { client, depth } = this;
    if (!('transaction' in client))
      return savepoint(client, depth, () => work(new PgliteConnection(client, depth + 1)));
    return client.transaction((tx) => work(new PgliteConnection(tx, 1)));
  }
}

async function savepoint<T>(tx: Transaction, depth: number, work: () => Promise<T>): Promise<T> {
  const name = `sp${depth}`;
  await tx.exec(`savepoint ${name}`);
  try {
    const value = await work();
    await tx.exec(`release savepoint ${name}`);
    return value;
  } catch (err) {
    await tx.exec(`rollback to savepoint ${name}`);
    throw err;
  }
}
