/**
 * A database as a deployment has it before a migration: a folder of drizzle-kit's layout (the
 * SQL files and meta/_journal.json, all Drizzle's migrators read) holding the project's first
 * `count` migrations, for src/db/migrations.ts `migrate` or Drizzle's PGlite migrator; and
 * such a database itself, seeded (deploymentBefore).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { openDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { migrationsFolder } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrations.ts';
import { SESSION_OPTIONS } from '../../src/db/postgres.ts';
import { freshDatabaseUrl } from './app.ts';

export function migrationsBefore(t: { teardown(fn: () => void): void }, count: number): string {
  const folder = mkdtempSync(join(tmpdir(), 'migrations-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  const journal = JSON.parse(
    readFileSync(join(migrationsFolder, 'meta/_journal.json'), 'utf8'),
  ) as {
    entries: { tag: string }[];
  };
  journal.entries = journal.entries.slice(0, count);
  mkdirSync(join(folder, 'meta'));
  writeFileSync(join(folder, 'meta/_journal.json'), JSON.stringify(journal));
  for (const { tag } of journal.entries)
    cpSync(join(migrationsFolder, `${tag}.sql`), join(folder, `${tag}.sql`));
  return folder;
}

/**
 * A database of this test file (DATABASE_URL's server, or PGlite in a folder) migrated to the
 * project's first `count` migrations and seeded with `seed` (SQL); the returned function opens
 * it as the server does, which runs the migrations after them.
 */
export async function deploymentBefore(
  t: Test,
  count: number,
  seed: string,
): Promise<() => Promise<DatabaseHandle>> {
  const folder = migrationsBefore(t, count);
  if (process.env.DATABASE_URL?.startsWith('postgres')) {
    const url = await freshDatabaseUrl(t, { empty: true });
    await migrate(url, SESSION_OPTIONS, folder);
    const postgres = (await import('postgres')).default;
    const seeding = postgres(url, { ...SESSION_OPTIONS, max: 1 });
    await seeding.unsafe(seed);
    await seeding.unsafe('vacuum analyze');
    await seeding.end();
    return () => openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  }
  const dir = mkdtempSync(join(tmpdir(), 'pglite-before-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [{ PGlite }, { drizzle }, { migrate: migratePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
  ]);
  const client = await PGlite.create({ dataDir: dir });
  await client.exec("set time zone 'UTC'");
  await migratePglite(drizzle({ client }), { migrationsFolder: folder });
  await client.exec(seed);
  await client.close();
  return () => openDatabase({ databaseUrl: undefined, pgliteDir: dir });
}
