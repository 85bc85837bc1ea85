/**
 * The upsert / idempotent-replay lookup (findByExternalIds) is an index lookup on
 * (seller, environment, external_id), whatever the seller's inventory: the earlier
 * `external_id in (select ...)` form scanned every listing of the seller, so replays slowed
 * as the inventory grew (found by `npm run bench`, README "Performance").
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import type { Db } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { ListingsRepository } from '../../src/listings/listings-repository.ts';
import { listingsApp } from './support.ts';

const app = await listingsApp(t);

t.test('EXPLAIN: external ids are an index condition, not a filter over the seller', async (t) => {
  const [seller] = await queryRows<{ id: string }>(
    app.db,
    sql`insert into users (username, display_name, password_hash) values ('inventory_seller', 'Inventory', 'not-a-hash') returning id`,
  );
  await app.db.execute(sql`
    insert into listings (seller_id, environment, status, title, price_cents, external_id, published_at)
    select ${seller!.id}::uuid, 'sandbox', 'draft', 'Inventory ' || i, 100 + i, 'ext-' || i,
           now() - interval '1 day' - i * interval '1 millisecond'
    from generate_series(1, 3000) as i`);
  await app.db.execute(sql`analyze listings`);

  const plan = await app.db.transaction(async (tx) => {
    const explaining = { execute: (query: Parameters<Db['execute']>[0]) => tx.execute(sql`explain ${query}`) } as unknown as Db;
    const rows = await new ListingsRepository(explaining).findByExternalIds(seller!.id, 'sandbox', ['ext-17', 'ext-2900']);
    return rows.map((r) => Object.values(r as unknown as Record<string, string>)[0]).join('\n');
  });
  t.match(plan, /Index Cond: .*external_id = ANY/, `external_id is in the index condition\n${plan}`);
  t.notMatch(plan, /Semi Join/, 'no semi-join over the seller\'s listings');

  const found = await new ListingsRepository(app.db).findByExternalIds(seller!.id, 'sandbox', ['ext-17', 'ext-2900', 'missing']);
  t.strictSame(found.map((r) => r.external_id), ['ext-17', 'ext-2900'], 'the rows asked for, in external_id order');
});
