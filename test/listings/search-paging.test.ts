/**
 * Property: under every order, paging a search visits every listing that matched when paging
 * began exactly once, while other listings are created and matching ones are edited meanwhile
 * (OpenAPI "Search and sync", Cursors). Two sellers' live listings on the public search; any
 * page size; equal prices (ties) included. Edits change fields outside the order's key
 * (color), except under sort=updated_at, where an edited listing moves to the end of the order
 * and is seen again, newer: the sync promise.
 */
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { call, listingsApp, PHOTO, type Json } from './support.ts';
import { sleep } from '../helpers/wait.ts';
import { seed } from '../helpers/seed.ts';

t.comment(`fast-check seed ${seed} (test/helpers/seed.ts; TEST_SEED=n reruns one)`);

// sort=updated_at lists a change once it is this old (OpenAPI "Search and sync", Sync).
const SETTLE_MS = 250;
const app = await listingsApp(t, { SYNC_SETTLE_MS: String(SETTLE_MS) });
// Time is the subject: sort=updated_at lists a change once it is SYNC_SETTLE_MS old.
const settle = () => sleep(SETTLE_MS + 50);
const sellers = await Promise.all(
  [0, 1].map(async () => createKey(app, await createDeveloper(app), 'live')),
);

const SORTS = ['newest', 'price_asc', 'price_desc', 'updated_at', 'relevance'] as const;
type Sort = (typeof SORTS)[number];

let word = 0;
async function create(key: string, title: string, price: number): Promise<Json> {
  const res = await call(app, 'POST', '/api/v1/listings', {
    key,
    body: { title, price_cents: price, status: 'active', cover_image_url: PHOTO },
  });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** The sort key of a listing as the order compares it, for checking the order of a walk. */
function inOrder(sort: Sort, a: Json, b: Json): boolean {
  switch (sort) {
    case 'newest':
      return a.published_at > b.published_at;
    case 'price_asc':
      return (
        a.price_cents < b.price_cents ||
        (a.price_cents === b.price_cents && a.published_at < b.published_at)
      );
    case 'price_desc':
      return (
        a.price_cents > b.price_cents ||
        (a.price_cents === b.price_cents && a.published_at > b.published_at)
      );
    case 'updated_at':
    case 'relevance':
      // updated_at: checked as a sync (the last version wins); relevance: the server's ranks.
      return true;
  }
}

for (const sort of SORTS) {
  t.test(
    `${sort}: every listing that matched is seen once, whatever happens meanwhile`,
    async (t) => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 30 }),
          fc.integer({ min: 1, max: 7 }),
          fc.array(fc.record({ creates: fc.nat(2), edits: fc.nat(2), pick: fc.nat() }), {
            maxLength: 40,
          }),
          async (prices, limit, meanwhile) => {
            runs += 1;
            // Its own word per run: earlier runs' listings never match.
            word += 1;
            const q = `widget${word}x`;
            const before: Json[] = [];
            for (const [i, price] of prices.entries())
              before.push(await create(sellers[i % 2]!, `Blue ${q}`, price * 100));
            // The last color each edited listing was given: a sync must end on that version.
            const edited = new Map<string, string>();
            const seen: Json[] = [];
            if (sort === 'updated_at') await settle();
            let cursor: string | null = null;
            let query = `q=${q}&sort=${sort}`;
            let returned = false;
            for (let page = 0; ; page += 1) {
              if (page === 200) throw new Error('more than 200 pages');
              // Writes go on while the first pass pages; the sync's return visit only reads.
              // (at most one step per page: new listings ahead of the cursor must run out).
              const step = returned ? undefined : meanwhile[page];
              const writes: Promise<unknown>[] = [];
              for (let c = 0; c < (step?.creates ?? 0); c += 1)
                writes.push(
                  create(sellers[c % 2]!, `Red ${q}`, 100 * (1 + ((step!.pick + c) % 6))),
                );
              const editing = new Set<number>();
              for (let e = 0; e < (step?.edits ?? 0); e += 1) {
                const index = (step!.pick + e) % before.length;
                // Two edits of one listing sent at once commit in either order: which is the
                // last is not the test's to say. One edit per listing per step.
                if (editing.has(index)) continue;
                editing.add(index);
                const color = `c${page}-${e}`;
                edited.set(before[index]!.id, color);
                writes.push(
                  call(app, 'PATCH', `/api/v1/listings/${before[index]!.id}`, {
                    key: sellers[index % 2]!,
                    body: { color },
                  }),
                );
              }
              const after: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
              const url = `/api/v1/listings?${query}&limit=${limit}${after}`;
              const [res] = await Promise.all([call(app, 'GET', url), ...writes]);
              if (res.status !== 200)
                throw new Error(`${url}: ${res.status} ${JSON.stringify(res.body)}`);
              seen.push(...res.body.data);
              cursor = res.body.meta.next_cursor;
              if (cursor !== null) continue;
              // A sync client comes back later from the last updated_at it saw (inclusive): the
              // changes made while it paged have settled by then.
              if (sort !== 'updated_at' || returned) break;
              await settle();
              returned = true;
              const last = seen[seen.length - 1]?.updated_at;
              if (last) query = `q=${q}&sort=updated_at&updated_since=${encodeURIComponent(last)}`;
            }
            if (sort === 'updated_at') {
              const latest = new Map<string, Json>();
              for (const l of seen) latest.set(l.id, l);
              for (const l of before)
                if (!latest.has(l.id)) throw new Error(`${l.id} was never seen`);
              for (const [id, color] of edited)
                if (latest.get(id)?.color !== color)
                  throw new Error(`${id}: the last version seen is not the last edit`);
              return;
            }
            const counts = new Map<string, number>();
            for (const l of seen) counts.set(l.id, (counts.get(l.id) ?? 0) + 1);
            for (const l of before) {
              const n = counts.get(l.id) ?? 0;
              if (n === 0) throw new Error(`${l.id} (price ${l.price_cents}) was skipped`);
              if (n > 1) throw new Error(`${l.id} was seen ${n} times`);
            }
            for (const [id, n] of counts)
              if (n > 1) throw new Error(`${id} (created meanwhile) was seen ${n} times`);
            for (let i = 1; i < seen.length; i += 1)
              if (!inOrder(sort, seen[i - 1], seen[i]) && seen[i - 1].id !== seen[i].id)
                throw new Error(`out of order at ${i}: ${JSON.stringify([seen[i - 1], seen[i]])}`);
          },
        ),
        { numRuns: 6, endOnFailure: true },
      );
      t.ok(runs > 0, `${runs} runs`);
    },
  );
}

t.test('a search that runs out of its time answers 503 and says how to narrow it', async (t) => {
  const slow = await listingsApp(t, { SEARCH_TIMEOUT_MS: '1' });
  const [seller] = await queryRows<{ id: string }>(
    slow.db,
    sql`insert into users (username, display_name, password_hash)
        values ('slow_seller', 'Slow', 'not-a-hash') returning id`,
  );
  // Enough matches that ranking the window takes well over the 1 ms budget.
  await slow.db.execute(sql`
    insert into listings (seller_id, environment, status, title, price_cents, published_at)
    select ${seller!.id}, 'live', 'active', 'slow coat ' || i, 100 + i,
      now() - interval '1 day' + i * interval '1 millisecond'
    from generate_series(1, 20000) as i`);
  const res = await call(slow, 'GET', '/api/v1/listings?q=coat&sort=relevance&limit=100');
  if (slow.database.driver === 'pglite' || slow.database.searchDb === undefined) {
    // The embedded database runs no timers, and behind a transaction-mode pooler the search
    // pool's connections cannot start with a statement_timeout (docs/configuration.md): the
    // budget is then the role's, if the operator set one.
    t.equal(res.status, 200, 'PGlite or a pooler: the search runs to its end');
    return;
  }
  t.equal(
    res.status,
    503,
    `503, not 500 or a slow page: ${JSON.stringify(res.body).slice(0, 200)}`,
  );
  t.equal(res.body.error.code, 'service_unavailable');
  t.match(res.body.error.message, /narrow/i, 'says how to make it cheaper');
  const plain = await call(slow, 'GET', '/api/v1/listings?limit=100');
  t.equal(plain.status, 200, 'the plain feed has no such budget');
});
