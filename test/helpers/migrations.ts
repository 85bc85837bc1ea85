/**
 * A database as a deployment has it before a migration: a folder of drizzle-kit's layout (the
 * SQL files and meta/_journal.json, all Drizzle's migrators read) holding the project's first
 * `count` migrations, for src/db/migrations.ts `migrate` or Drizzle's PGlite migrator.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrationsFolder } from '../../src/db/database.ts';

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
