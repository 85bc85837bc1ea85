/**
 * In-memory databases start from a migrated snapshot (src/db/pglite-template.ts): the first one
 * writes it under node_modules/.cache of the working directory, later ones (in any process)
 * load it, and each is still a database of its own. A damaged snapshot is replaced,
 * an outdated one is removed, and without node_modules there is no cache at all. This file
 * works in a directory of its own (process.chdir), so the suite's snapshot is not touched.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { migrationsFolder } from '../../src/db/database.ts';
import { pgliteTemplate } from '../../src/db/pglite-template.ts';
import { queryRows } from '../../src/db/rows.ts';

const cwd = mkdtempSync(join(tmpdir(), 'pglite-template-'));
const cache = join(cwd, 'node_modules', '.cache', 'marketplace-listings-api');
mkdirSync(cache, { recursive: true });
const outdated = join(cache, 'pglite-000000000000000000000000.tar.gz');
writeFileSync(outdated, 'a snapshot of older migrations');
const home = process.cwd();
process.chdir(cwd);
t.teardown(() => process.chdir(home));

const openMemory = () => openDatabase({ databaseUrl: 'memory://', pgliteDir: '' });
const snapshots = () => readdirSync(cache).filter((name) => name.endsWith('.tar.gz'));
const count = async (handle: Awaited<ReturnType<typeof openMemory>>, table: string) =>
  (
    await queryRows<{ n: number }>(
      handle.db,
      sql`select count(*)::int as n from ${sql.identifier(table)}`,
    )
  )[0]!.n;

t.test('the first in-memory database writes the snapshot; the next ones load it', async (t) => {
  const first = await openMemory();
  t.teardown(() => first.close());
  t.same(snapshots(), [snapshots().find((name) => /^pglite-[0-9a-f]{24}\.tar\.gz$/.test(name))]);
  t.notOk(existsSync(outdated), 'the outdated snapshot is removed');

  // A snapshot with a marker table under the current key: a database that has the table was
  // loaded from it (initdb and the migrations would not make it).
  const template = (await pgliteTemplate(migrationsFolder))!;
  const marked = await PGlite.create({ loadDataDir: (await template.read())! });
  await marked.exec('create table loaded_from_snapshot (id int)');
  await template.write(await marked.dumpDataDir('gzip'));
  await marked.close();

  const second = await openMemory();
  t.teardown(() => second.close());
  t.equal(await count(second, 'loaded_from_snapshot'), 0, 'loaded from the snapshot');
  t.equal(await count(second, 'listings'), 0, 'migrated');
  const [buffers] = await queryRows<{ shared_buffers: string }>(
    second.db,
    sql`show shared_buffers`,
  );
  t.equal(buffers!.shared_buffers, '16MB', 'in memory: 16 MB of shared buffers, not 128 MB');

  // Each is a database of its own.
  await first.db.execute(
    sql`insert into users (username, display_name, password_hash) values ('only_first', 'A', 'x')`,
  );
  t.equal(await count(first, 'users'), 1);
  t.equal(await count(second, 'users'), 0, 'a write to one is not seen by the other');
});

t.test('a damaged snapshot is replaced by a good one', async (t) => {
  const [name] = snapshots();
  writeFileSync(join(cache, name!), 'not a tar file');
  const handle = await openMemory();
  t.teardown(() => handle.close());
  t.equal(await count(handle, 'listings'), 0, 'the database opens, migrated');
  t.ok(statSync(join(cache, name!)).size > 1_000_000, 'the snapshot was written again');
  t.same(snapshots(), [name]);
});

t.test('without node_modules in the working directory there is no cache', async (t) => {
  const bare = mkdtempSync(join(tmpdir(), 'pglite-template-bare-'));
  t.equal(await pgliteTemplate(migrationsFolder, bare), undefined);
});
