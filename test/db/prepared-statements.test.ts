/**
 * DATABASE_PREPARED_STATEMENTS (src/db/gated-client.ts). On: the app's queries run as
 * prepared statements (Drizzle asks postgres.js not to prepare, which costs a second round trip
 * and a fresh plan per statement). Off (the default with DATABASE_DIRECT_URL, behind a
 * transaction-mode pooler that cannot follow named statements): none is prepared, and queries,
 * transactions and savepoints still answer. Checked on the server itself, in
 * pg_prepared_statements of the connection. Through .ci/run's PgBouncer leg `off` runs through
 * the pooler, `on` on the direct URL.
 */
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { openDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const skip = !onPostgres && 'PostgreSQL only (DATABASE_URL)';

/** Runs statements alone, in a transaction and in a savepoint; returns what was prepared. */
async function exercise(t: Test, handle: DatabaseHandle, marker: string): Promise<string[]> {
  const prepared = (db: typeof handle.db) =>
    queryRows<{ statement: string }>(
      db,
      sql`select statement from pg_prepared_statements where statement like ${`%${marker}%`}`,
    );
  let inTransaction: string[] = [];
  await handle.db.transaction(async (tx) => {
    const [withParameter] = await queryRows<{ x: number }>(
      tx,
      sql`select ${41}::int + 1 as x ${sql.raw(`/* ${marker}_tx_param */`)}`,
    );
    t.equal(withParameter?.x, 42, 'a statement in a transaction answers');
    await tx.transaction(async (sp) => {
      const [y] = await queryRows<{ y: number }>(
        sp,
        sql`select ${1}::int as y ${sql.raw(`/* ${marker}_savepoint */`)}`,
      );
      t.equal(y?.y, 1, 'a statement in a savepoint answers');
    });
    inTransaction = (await prepared(tx)).map((r) => r.statement);
  });
  // Outside a transaction, and again on whichever pooled connection answers: still correct.
  for (let i = 0; i < 3; i += 1) {
    const [row] = await queryRows<{ x: number }>(
      handle.db,
      sql`select ${i}::int as x ${sql.raw(`/* ${marker}_pool */`)}`,
    );
    t.equal(row?.x, i, `run ${i + 1} answers its own parameter`);
  }
  return inTransaction;
}

t.test('on: queries, transactions and savepoints use prepared statements', { skip }, async (t) => {
  const env = await freshDatabaseEnv(t);
  // Named statements need a session: the direct URL when DATABASE_URL is a pooler.
  const direct = env.DATABASE_DIRECT_URL ?? env.DATABASE_URL;
  const handle = await openDatabase({
    databaseUrl: direct,
    directUrl: direct,
    preparedStatements: true,
    pgliteDir: '',
  });
  t.teardown(() => handle.close());
  const statements = await exercise(t, handle, 'bench_marker');
  t.ok(
    statements.some((s) => s.includes('bench_marker_tx_param')),
    'a statement in a transaction is prepared',
  );
  t.ok(
    statements.some((s) => s.includes('bench_marker_savepoint')),
    'a statement in a savepoint is prepared',
  );
});

t.test('off: nothing is prepared, everything answers', { skip }, async (t) => {
  const env = await freshDatabaseEnv(t);
  const handle = await openDatabase({
    databaseUrl: env.DATABASE_URL,
    directUrl: env.DATABASE_DIRECT_URL,
    preparedStatements: false,
    pgliteDir: '',
  });
  t.teardown(() => handle.close());
  t.same(await exercise(t, handle, 'unprepared_marker'), [], 'no statement prepared');
  const [row] = await queryRows<{ n: number }>(
    handle.db,
    sql`select count(*)::int as n from pg_prepared_statements`,
  );
  t.equal(row?.n, 0, 'none at all on the connection that answers');
});

t.test('the default follows DATABASE_DIRECT_URL', { skip }, async (t) => {
  const env = await freshDatabaseEnv(t);
  const direct = env.DATABASE_DIRECT_URL ?? env.DATABASE_URL;
  for (const [directUrl, expected] of [
    [undefined, 1],
    [direct, 0],
  ] as const) {
    const handle = await openDatabase({
      databaseUrl: direct,
      directUrl,
      pgliteDir: '',
      poolSize: 1,
    });
    await queryRows(handle.db, sql`select ${1}::int as x /* default_marker */`);
    const [row] = await queryRows<{ n: number }>(
      handle.db,
      sql`select count(*)::int as n from pg_prepared_statements
          where statement like '%default_marker%'`,
    );
    await handle.close();
    t.equal(
      row?.n,
      expected,
      directUrl ? 'with a direct URL: not prepared' : 'without one: prepared',
    );
  }
});
