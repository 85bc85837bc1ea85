/**
 * On PostgreSQL, the app's queries run as prepared statements (src/db/client.ts `preparing`):
 * Drizzle asks postgres.js not to prepare, which costs a second round trip and a fresh plan
 * per statement. Checked on the server itself, in pg_prepared_statements of the connection.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

t.test(
  'queries, transactions and savepoints use prepared statements',
  { skip: !onPostgres && 'PostgreSQL only (DATABASE_URL)' },
  async (t) => {
    const handle = await openDatabase({ databaseUrl: await freshDatabaseUrl(t), pgliteDir: '' });
    t.teardown(() => handle.close());
    const prepared = (db: typeof handle.db) =>
      queryRows<{ statement: string }>(
        db,
        sql`select statement from pg_prepared_statements where statement like '%bench_marker%'`,
      );

    await handle.db.transaction(async (tx) => {
      const [row] = await queryRows<{ x: number }>(
        tx,
        sql`select ${41}::int + 1 as x /* bench_marker_tx */`,
      );
      t.equal(row?.x, 42, 'the prepared statement answers');
      await tx.transaction(async (sp) => {
        await queryRows(sp, sql`select ${1}::int as y /* bench_marker_savepoint */`);
      });
      const statements = (await prepared(tx)).map((r) => r.statement);
      t.ok(
        statements.some((s) => s.includes('bench_marker_tx')),
        'a statement in a transaction is prepared',
      );
      t.ok(
        statements.some((s) => s.includes('bench_marker_savepoint')),
        'a statement in a savepoint is prepared',
      );
    });

    // Outside a transaction, and again on whichever pooled connection answers: still correct.
    for (let i = 0; i < 3; i += 1) {
      const [row] = await queryRows<{ x: number }>(
        handle.db,
        sql`select ${i}::int as x /* bench_marker_pool */`,
      );
      t.equal(row?.x, i, `run ${i + 1} of a prepared statement answers its own parameter`);
    }
  },
);
