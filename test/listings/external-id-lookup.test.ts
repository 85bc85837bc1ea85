/**
 * The upsert / idempotent-replay lookup (findByExternalIds) seeks the unique
 * (external_id, seller, environment) index for every id, whatever the seller's inventory and
 * whatever the planner's statistics say. The earlier `external_id = any(...) order by
 * external_id` was planned as a scan of all the seller's rows with external_id as a *filter*
 * once the statistics no longer knew how big the seller had grown (issue #18 item 0: 72 ms per
 * replay for a seller with 152,000 listings). Reproduced here as it happens in production: the
 * table is analyzed while the seller is small, then the seller's inventory grows.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { explaining, planText } from '../helpers/explaining.ts';
import { queryRows } from '../../src/db/rows.ts';
import { ListingsRepository } from '../../src/listings/listings-repository.ts';
import { listingsApp } from './support.ts';

const INVENTORY = 20_000;
const app = await listingsApp(t);

const [seller] = await queryRows<{ id: string }>(
  app.db,
  sql`insert into users (username, display_name, password_hash) values ('inventory_seller', 'Inventory', 'not-a-hash') returning id`,
);
const owner = { sellerId: seller!.id, environment: 'sandbox' as const };

// The seller's inventory as the API makes it: most listings without an external_id, one in a
// hundred with one. First with no statistics at all (a database restored, or filled faster than
// autovacuum analyzes it): the planner then guesses the seller holds a row or two, which is
// when the old form scanned the seller's rows in index order and filtered on external_id.
await app.db.execute(sql`alter table listings set (autovacuum_enabled = false)`);
await app.db.execute(sql`
  insert into listings (seller_id, environment, status, title, price_cents, external_id, published_at)
  select ${seller!.id}::uuid, 'sandbox', 'draft', 'Inventory ' || i, 100 + i,
         case when i % 100 = 17 then 'ext-' || i end,
         timestamptz '2020-01-01 00:00:00Z' - i * interval '1 microsecond'
  from generate_series(1, ${INVENTORY}::int) as i`);

/** The plan of the lookup, EXPLAIN ANALYZE'd in a transaction rolled back. */
async function planOf(
  ids: string[],
  mode: 'force_custom_plan' | 'force_generic_plan',
): Promise<string> {
  let plan = '';
  await app.db
    .transaction(async (tx) => {
      await tx.execute(sql.raw(`set local plan_cache_mode = ${mode}`));
      const repository = new ListingsRepository(explaining(tx, 'explain analyze'));
      plan = planText(await repository.findByExternalIds(owner, ids));
      throw new RollBack();
    })
    .catch((err) => {
      if (!(err instanceof RollBack)) throw err;
    });
  return plan;
}
class RollBack extends Error {}

for (const analyzed of [false, true]) {
  t.test(
    `EXPLAIN, ${analyzed ? 'statistics fresh' : 'no statistics yet'}, ${INVENTORY} listings of the seller`,
    async (t) => {
      if (analyzed) await app.db.execute(sql`analyze listings`);
      for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
        for (const ids of [['ext-17'], ['ext-17', 'ext-19917', 'missing']]) {
          const plan = await planOf(ids, mode);
          const label = `${mode}, ${ids.length} id(s)`;
          t.match(
            plan,
            /Index Cond: \(external_id = /,
            `${label}: external_id in the index condition`,
          );
          t.notMatch(plan, /Filter: .*external_id/, `${label}: external_id is never a filter`);
          const removed = [...plan.matchAll(/Rows Removed by Filter: (\d+)/g)].reduce(
            (sum, m) => sum + Number(m[1]),
            0,
          );
          t.ok(
            removed < 10,
            `${label}: ${removed} rows read and thrown away (not the seller's ${INVENTORY})`,
          );
        }
      }
    },
  );
}

t.test(
  'the rows asked for, in external_id order, missing ids and duplicates ignored',
  async (t) => {
    const repository = new ListingsRepository(app.db);
    const found = await repository.findByExternalIds(owner, [
      'ext-2917',
      'missing',
      'ext-17',
      'ext-2917',
    ]);
    t.strictSame(
      found.map((r) => r.external_id),
      ['ext-17', 'ext-2917'],
    );
    t.equal(
      (await repository.findByExternalIds({ ...owner, environment: 'live' }, ['ext-17'])).length,
      0,
      'another environment: nothing',
    );
    t.equal((await repository.findByExternalIds(owner, [])).length, 0, 'no ids: nothing');
  },
);
