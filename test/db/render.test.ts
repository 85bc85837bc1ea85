/**
 * `render` (src/db/rows.ts) must give the text and parameters PostgreSQL's dialect gives for
 * every raw statement. The suite runs with SQL_RENDER_CHECK=1, which compares the two on every
 * query it runs; this file pins the chunk kinds one by one, including those left to Drizzle.
 */
import { sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import t, { type Test } from 'tap';
import { render } from '../../src/db/rows.ts';
import { listings } from '../../src/db/schema.ts';
import { orderingKeys } from '../../src/db/ordering-key.ts';
import { ListingChanges } from '../../src/listings/listing-changes.ts';
import { recordEventsInStatement } from '../../src/events/events-repository.ts';

const dialect = new PgDialect();
/** Text and parameters: what the sessions send (the dialect's `typings` serve other drivers). */
const same = (t: Test, query: SQL, what: string) => {
  const { sql: text, params } = dialect.sqlToQuery(query);
  const ours = render(query);
  t.same({ sql: ours.sql, params: ours.params }, { sql: text, params }, what);
};

t.test('each chunk kind renders as the dialect renders it', async (t) => {
  const id = 'f6a1c7e2-0d5b-4c1e-9b0a-2f3e4d5c6b7a';
  same(t, sql`select 1`, 'text alone');
  same(t, sql`select * from x where id = ${id} and n = ${3} and ok = ${true}`, 'plain values');
  same(t, sql`select ${null}::text, ${10n}::int8`, 'null and bigint');
  same(t, sql`select ${sql.identifier('we"ird')}.${sql.identifier('col')}`, 'identifiers, quoted');
  same(t, sql`select ${sql.raw('a, b')} from t where ${undefined} true`, 'raw text, undefined');
  same(
    t,
    sql`select 1 where ${sql.join([sql`a = ${1}`, sql`b = ${2}`, sql`c = ${3}`], sql` and `)}`,
    'nested templates and join, parameters numbered in order',
  );
  same(
    t,
    sql`select * from t where id = ${sql.placeholder('id')} limit ${sql.placeholder('n')}`,
    'placeholders',
  );
  same(
    t,
    sql`with ${orderingKeys('keys', 'listings_published_seq', sql`(select ${5})`)} select 1`,
    "the ordering keys' CTE",
  );
  same(
    t,
    sql`with ${new ListingChanges([recordEventsInStatement]).ctes(
      { environment: 'sandbox', type: 'listing.created' },
      {
        ord: sql`0`,
        data: sql`'{}'::json`,
        listing_id: sql`s.id`,
        seller_id: sql`s.id`,
        app_id: sql`s.id`,
      },
      sql`(select gen_random_uuid() as id) s`,
    )} select 1`,
    "the outbox's CTEs",
  );
});

t.test('what it does not render itself, Drizzle does, alike', async (t) => {
  same(t, sql`select * from ${listings} where ${listings.id} = ${'x'}`, 'tables and columns');
  same(t, sql`select 1 where id in ${['a', 'b']}`, 'an array: a parameter list');
  same(t, sql`select ${sql.param(7)}`, 'an explicit Param');
  same(t, sql`select ${new Date(0)}`, 'an object value');
});
