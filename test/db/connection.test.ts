/**
 * The database boundary's contract (src/db/database.ts Connection), on each of its two
 * implementations: embedded PGlite always (memory://, so the PostgreSQL pass covers it too) and
 * PostgreSQL through the pool's gate when DATABASE_URL names a server. A transaction commits
 * whole or not at all; a nested one is a savepoint that rolls back alone; a statement in a
 * transaction sees its uncommitted rows, whichever way it was written (the query builder,
 * execute, a RenderedSql); timestamps come back as PostgreSQL's text and JSON as values.
 */
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { openDatabase, type DatabaseHandle, type Db } from '../../src/db/client.ts';
import { isoTimestamp, queryRows, RenderedSql } from '../../src/db/rows.ts';
import { users } from '../../src/db/schema.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

class RolledBack extends Error {}

const USERNAME = new RenderedSql<{ username: string }>(
  sql`select username from users where username = ${sql.placeholder('username')}`,
);

async function usernames(db: Db): Promise<string[]> {
  const rows = await db.select({ username: users.username }).from(users);
  return rows.map((row) => row.username).sort();
}

const addUser = (db: Db, username: string) =>
  db.insert(users).values({ username, displayName: username, passwordHash: 'x' });

async function contract(t: Test, open: () => Promise<DatabaseHandle>) {
  const handle = await open();
  t.teardown(() => handle.close());
  const { db } = handle;

  await db.transaction(async (tx) => {
    await addUser(tx, 'committed');
    const seen = await USERNAME.rows<{ username: string }>(tx, { username: 'committed' });
    t.same(seen, [{ username: 'committed' }], 'a RenderedSql in it sees its uncommitted row');
    await tx
      .transaction(async (sp) => {
        await addUser(sp, 'in_savepoint');
        t.same(await usernames(sp), ['committed', 'in_savepoint'], 'the savepoint sees both');
        throw new RolledBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RolledBack)) throw err;
      });
    await tx.transaction((sp) => addUser(sp, 'kept_savepoint'));
  });
  t.same(
    await usernames(db),
    ['committed', 'kept_savepoint'],
    'committed: the transaction and its released savepoint, not the one rolled back',
  );

  const failed = await db
    .transaction(async (tx) => {
      await addUser(tx, 'never');
      throw new RolledBack();
    })
    .then(
      () => undefined,
      (err: unknown) => err,
    );
  t.ok(failed instanceof RolledBack, 'a transaction whose work throws fails with its error');
  t.notOk((await usernames(db)).includes('never'), 'and nothing of it was written');

  const [row] = await queryRows<{ at: string; doc: { a: number[] }; n: number }>(
    db,
    sql`select timestamptz '2026-12-04 10:11:12.345678+00' as at,
          ${JSON.stringify({ a: [1, 2] })}::jsonb as doc, 7 as n`,
  );
  t.equal(isoTimestamp(row!.at), '2026-12-04T10:11:12.345678Z', 'a timestamptz as text (µs kept)');
  t.same(
    row!.doc,
    { a: [1, 2] },
    'a JSON parameter passed as its text, the column read as a value',
  );
  t.equal(row!.n, 7, 'an int4 as a number');
  const [created] = await db
    .select({ createdAt: users.createdAt })
    .from(users)
    .where(sql`${users.username} = 'committed'`);
  t.match(
    created!.createdAt,
    /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+\+00$/,
    "the builder's timestamp column (mode 'string') as PostgreSQL's text, in UTC",
  );
}

t.test('PGlite (memory://)', (t) =>
  contract(t, () => openDatabase({ databaseUrl: 'memory://', pgliteDir: '' })),
);

t.test('PostgreSQL, through the pool gate', { skip: !onPostgres && 'DATABASE_URL' }, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t);
  await contract(t, () => openDatabase({ databaseUrl, pgliteDir: '', poolSize: 2 }));
});
