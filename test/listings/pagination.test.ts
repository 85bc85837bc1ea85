/**
 * Keyset pagination of GET /listings (OpenAPI "Pagination"): newest published_at first,
 * exclusive cursor, next_cursor null on the last page, every item exactly once whatever the
 * limit (items of one batch share a millisecond), and the feed queries on their indexes.
 */
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import t from 'tap';
import { explaining, planText } from '../helpers/explaining.ts';
import { queryRows } from '../../src/db/rows.ts';
import { ListingsRepository } from '../../src/listings/listings-repository.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  call,
  createSeller,
  expectError,
  expectOk,
  listingsApp,
  PHOTO,
  type Json,
} from './support.ts';
import { seed } from '../helpers/seed.ts';

t.comment(`fast-check seed ${seed} (test/helpers/seed.ts; TEST_SEED=n reruns one)`);

const app = await listingsApp(t);

/** RFC 3339 in UTC with six fractional digits (OpenAPI "Pagination": full stored precision). */
const MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

interface Walk {
  items: Json[];
  pages: { count: number; size: number; nextCursor: string | null }[];
}

/** Follows next_cursor from the first page to the end. */
async function walk(key: string | undefined, limit: number): Promise<Walk> {
  const walked: Walk = { items: [], pages: [] };
  let cursor: string | null = null;
  for (let guard = 0; guard < 1000; guard += 1) {
    const query: string = `limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const res = await call(app, 'GET', `/api/v1/listings?${query}`, key ? { key } : {});
    if (res.status !== 200)
      throw new Error(`GET ?${query}: ${res.status} ${JSON.stringify(res.body)}`);
    walked.items.push(...res.body.data);
    walked.pages.push({
      count: res.body.meta.count,
      size: res.body.data.length,
      nextCursor: res.body.meta.next_cursor,
    });
    const last = res.body.data.at(-1);
    if (res.body.meta.next_cursor !== null && res.body.meta.next_cursor !== last?.published_at) {
      throw new Error(
        `next_cursor ${res.body.meta.next_cursor} is not the last item's published_at ${last?.published_at}`,
      );
    }
    cursor = res.body.meta.next_cursor;
    if (cursor === null) return walked;
  }
  throw new Error('pagination did not end');
}

/** The walk visited exactly `expected` (ids), newest first, in full pages but the last. */
function checkWalk(walked: Walk, expected: string[], limit: number): string | null {
  const ids = walked.items.map((l) => l.id);
  if (new Set(ids).size !== ids.length)
    return `an item was returned twice (${ids.length} returned, ${new Set(ids).size} distinct)`;
  const missing = expected.filter((id) => !ids.includes(id));
  if (missing.length > 0 || ids.length !== expected.length)
    return `expected ${expected.length} items, got ${ids.length}; missing ${missing.length}`;
  for (const [i, item] of walked.items.entries()) {
    if (!MICROS.test(item.published_at))
      return `published_at ${item.published_at} lacks six fractional digits`;
    if (i > 0 && !(item.published_at < walked.items[i - 1].published_at)) {
      return `not strictly newest first at ${i}: ${walked.items[i - 1].published_at} then ${item.published_at}`;
    }
  }
  for (const [i, page] of walked.pages.entries()) {
    if (page.count !== page.size) return `meta.count ${page.count} but ${page.size} items`;
    if (page.size > limit) return `page of ${page.size} items for limit ${limit}`;
    const isLast = i === walked.pages.length - 1;
    if (!isLast && page.size !== limit)
      return `page ${i} holds ${page.size} items but more pages follow`;
    if (isLast && page.size === 0 && expected.length > 0)
      return 'an empty page after a full final one: next_cursor was not null on the last page';
  }
  return null;
}

t.test(
  'property: any limit visits every listing of a sandbox feed exactly once, newest first',
  async (t) => {
    const plan = fc.array(
      fc.oneof(
        fc.record({ kind: fc.constant('single' as const), n: fc.integer({ min: 1, max: 4 }) }),
        fc.record({ kind: fc.constant('batch' as const), n: fc.integer({ min: 1, max: 25 }) }),
      ),
      { maxLength: 5 },
    );
    const limit = fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 100 }));
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(plan, limit, fc.nat(), async (steps, pageSize, pick) => {
        runs += 1;
        const seller = await createSeller(app, { live: false });
        const created: string[] = [];
        for (const step of steps) {
          if (step.kind === 'batch') {
            const items = Array.from({ length: step.n }, (_, i) =>
              listingBody(i % 3 === 0 ? { status: 'active', cover_image_url: PHOTO } : {}),
            );
            const res = await call(app, 'POST', '/api/v1/listings/batch', {
              key: seller.sandbox,
              body: { items },
            });
            if (res.status !== 200)
              throw new Error(`batch: ${res.status} ${JSON.stringify(res.body)}`);
            created.push(...res.body.data.results.map((r: Json) => r.data.id));
          } else {
            // Concurrent singles: on PostgreSQL they can share a millisecond too.
            const answers = await Promise.all(
              Array.from({ length: step.n }, () =>
                call(app, 'POST', '/api/v1/listings', { key: seller.sandbox, body: listingBody() }),
              ),
            );
            for (const res of answers) {
              if (res.status !== 201)
                throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
              created.push(res.body.data.id);
            }
          }
        }
        if (created.length > 0) {
          // Every status is in a sandbox feed: archive one.
          const archived = await call(
            app,
            'DELETE',
            `/api/v1/listings/${created[pick % created.length]}`,
            { key: seller.sandbox },
          );
          if (archived.status !== 200) throw new Error(`archive: ${archived.status}`);
        }

        const walked = await walk(seller.sandbox, pageSize);
        const problem = checkWalk(walked, created, pageSize);
        if (problem) throw new Error(`${created.length} listings, limit ${pageSize}: ${problem}`);

        // Any item's published_at is a valid, exclusive cursor: the rest follows exactly.
        if (walked.items.length > 0) {
          const k = pick % walked.items.length;
          const cursor = walked.items[k].published_at;
          const res = await call(
            app,
            'GET',
            `/api/v1/listings?limit=100&cursor=${encodeURIComponent(cursor)}`,
            { key: seller.sandbox },
          );
          const rest = walked.items.slice(k + 1, k + 101).map((l) => l.id);
          if (
            res.status !== 200 ||
            JSON.stringify(res.body.data.map((l: Json) => l.id)) !== JSON.stringify(rest)
          ) {
            throw new Error(`cursor ${cursor} (item ${k}) did not return the items after it`);
          }
        }
      }),
      { numRuns: 15, endOnFailure: true },
    );
    t.equal(runs > 0, true, `${runs} runs`);
  },
);

t.test('the public feed: live active listings only, paged with several limits', async (t) => {
  const seller = await createSeller(app);
  const other = await createSeller(app);
  const publicIds: string[] = [];
  const active = () => listingBody({ status: 'active', cover_image_url: PHOTO });

  const batch = await call(app, 'POST', '/api/v1/listings/batch', {
    key: seller.live,
    body: { items: [...Array.from({ length: 20 }, active), listingBody(), listingBody()] },
  });
  expectOk(t, batch, 200, 'live');
  publicIds.push(...batch.body.data.results.slice(0, 20).map((r: Json) => r.data.id));
  for (let i = 0; i < 6; i += 1) {
    const res = await call(app, 'POST', '/api/v1/listings', {
      key: i % 2 ? seller.live : other.live,
      body: active(),
    });
    publicIds.push(expectOk(t, res, 201).id);
  }
  const archived = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', { key: other.live, body: active() }),
    201,
  );
  expectOk(
    t,
    await call(app, 'DELETE', `/api/v1/listings/${archived.id}`, { key: other.live }),
    200,
  );
  await call(app, 'POST', '/api/v1/listings/batch', {
    key: seller.sandbox,
    body: { items: Array.from({ length: 5 }, active) },
  });

  for (const limit of [1, 3, 7, 13, 26, 100]) {
    for (const key of [undefined, other.live]) {
      const problem = checkWalk(await walk(key, limit), publicIds, limit);
      t.equal(
        problem,
        null,
        `limit ${limit}, ${key ? 'live key' : 'anonymous'}: every public listing once, newest first`,
      );
    }
  }

  const first = await call(app, 'GET', '/api/v1/listings');
  expectOk(t, first, 200, 'live');
  t.equal(first.body.data.length, 24, 'default limit 24');
  t.equal(first.body.meta.count, 24);
  t.equal(
    first.body.meta.next_cursor,
    first.body.data[23].published_at,
    'next_cursor is the last item published_at',
  );
  const last = await call(
    app,
    'GET',
    `/api/v1/listings?cursor=${encodeURIComponent(first.body.meta.next_cursor)}`,
  );
  t.equal(last.body.data.length, publicIds.length - 24);
  t.equal(last.body.meta.next_cursor, null, 'null on the last page');
});

t.test('an empty feed: one empty page, next_cursor null', async (t) => {
  const seller = await createSeller(app, { live: false });
  const res = await call(app, 'GET', '/api/v1/listings', { key: seller.sandbox });
  expectOk(t, res, 200, 'sandbox');
  t.same(res.body.data, []);
  t.equal(res.body.meta.count, 0);
  t.equal(res.body.meta.next_cursor, null);
});

t.test(
  'cursor: an RFC 3339 timestamp is accepted; anything else is 400 at /query/cursor',
  async (t) => {
    for (const cursor of [
      '2999-01-01T00:00:00Z',
      '2999-01-01T00:00:00.123456Z',
      '2999-01-01T02:00:00+02:00',
    ]) {
      const res = await call(app, 'GET', `/api/v1/listings?cursor=${encodeURIComponent(cursor)}`);
      expectOk(t, res, 200, 'live');
    }
    const future = await call(
      app,
      'GET',
      `/api/v1/listings?limit=100&cursor=${encodeURIComponent('1970-01-01T00:00:00Z')}`,
    );
    t.same(future.body.data, [], 'nothing is older than the epoch');
    for (const cursor of [
      'yesterday',
      '1700000000000',
      '2026-13-01T00:00:00Z',
      '2026-11-20T25:00:00Z',
      'abc',
      "2026-11-20T14:03:12Z' or '1'='1",
    ]) {
      expectError(
        t,
        await call(app, 'GET', `/api/v1/listings?cursor=${encodeURIComponent(cursor)}`),
        400,
        'validation_error',
        '/query/cursor',
      );
    }
  },
);

t.test('EXPLAIN: the public feed and a seller feed run on their indexes', async (t) => {
  // Enough rows, over many sellers, for the planner to prefer the indexes.
  const sellers = await queryRows<{ id: string }>(
    app.db,
    sql`insert into users (username, display_name, password_hash)
        select 'bulk_seller_' || i, 'Bulk ' || i, 'not-a-hash' from generate_series(1, 40) as i returning id`,
  );
  await app.db.execute(sql`
    insert into listings (seller_id, environment, status, title, price_cents, published_at)
    select (${JSON.stringify(sellers.map((s) => s.id))}::jsonb ->> (i % 40))::uuid,
           case when i % 2 = 0 then 'live' else 'sandbox' end,
           (array['draft', 'active', 'archived'])[1 + (i / 2) % 3],
           'Bulk listing ' || i, 100 + i,
           now() - interval '2 days' - i * interval '1 millisecond'
    from generate_series(1, 6000) as i`);
  await app.db.execute(sql`analyze listings`);

  const someSeller = sellers[7]!.id;
  const cursor = '2999-01-01T00:00:00.000000Z';
  const plans = await app.db.transaction(async (tx) => {
    // Make the choice deterministic on tiny test tables; an index is still needed to be chosen.
    await tx.execute(sql`set local enable_seqscan = off`);
    // The repository's own SQL, prefixed with EXPLAIN: the test follows the query as it evolves.
    const repository = new ListingsRepository(explaining(tx, 'explain'));
    return {
      publicFirst: planText(await repository.page({ kind: 'public' }, { limit: 24 })),
      publicNext: planText(await repository.page({ kind: 'public' }, { limit: 24, cursor })),
      sellerFirst: planText(
        await repository.page(
          { kind: 'seller', sellerId: someSeller, environment: 'sandbox' },
          { limit: 24 },
        ),
      ),
      sellerNext: planText(
        await repository.page(
          { kind: 'seller', sellerId: someSeller, environment: 'sandbox' },
          { limit: 24, cursor },
        ),
      ),
    };
  });
  for (const [name, plan] of Object.entries(plans)) {
    const index = name.startsWith('public')
      ? 'listings_public_feed_idx'
      : 'listings_seller_feed_idx';
    t.match(plan, index, `${name} uses ${index}\n${plan}`);
    t.notMatch(plan, /\bSort\b/, `${name}: the index gives the order, no sort`);
  }
});
