/**
 * drizzle/0019: a saved search's keys carry its price range (saved_search_keys_price_idx), and
 * the keys of the saved searches saved before it get their search's range at the next start,
 * on either database; a search without a range keeps the widest, and still matches any price.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { deploymentBefore } from '../helpers/migrations.ts';

/** The migrations before drizzle/0019_saved_search_key_prices.sql. */
const BEFORE = 19;
const SEED = `
  insert into users (id, username, display_name, password_hash)
  values ('00000000-0000-4000-8000-000000000001', 'before_0019', 'B', 'x');
  insert into apps (id, owner_id, name)
  values ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'before 0019');
  insert into saved_searches (id, app_id, environment, user_id, via_token, name, brand, min_price_cents, max_price_cents)
  values
    ('00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-000000000002', 'live',
     '00000000-0000-4000-8000-000000000001', false, 'ranged', 'Filson', 2000, 8000),
    ('00000000-0000-4000-8000-00000000000b', '00000000-0000-4000-8000-000000000002', 'live',
     '00000000-0000-4000-8000-000000000001', false, 'under', 'Filson', null, 8000),
    ('00000000-0000-4000-8000-00000000000c', '00000000-0000-4000-8000-000000000002', 'live',
     '00000000-0000-4000-8000-000000000001', false, 'any price', 'Filson', null, null);
  insert into saved_search_keys (token, saved_search_id)
  select 'brand:' || md5('filson'), id from saved_searches;`;

t.test("the keys saved before get their search's price range", async (t) => {
  const open = await deploymentBefore(t, BEFORE, SEED);
  const handle = await open();
  t.teardown(() => handle.close());
  const keys = await queryRows<{ name: string; min: number; max: number }>(
    handle.db,
    sql`select s.name, k.min_price_cents as min, k.max_price_cents as max
        from saved_search_keys k join saved_searches s on s.id = k.saved_search_id
        order by s.name`,
  );
  t.same(
    keys.map((k) => ({ ...k })),
    [
      { name: 'any price', min: 0, max: 2147483647 },
      { name: 'ranged', min: 2000, max: 8000 },
      { name: 'under', min: 0, max: 8000 },
    ],
  );
});
