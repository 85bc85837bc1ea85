/**
 * GET /api/v1/listings as a search and sync endpoint (OpenAPI "Search and sync"), from the
 * outside: two sellers, each with an app of their own (sandbox and live keys), and an end user
 * acting through a third app's OAuth token, on the same data. Keywords, every filter, every
 * order, the owner view, sync, cursors, bad input, caching and the request log.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { ListingsSearchRepository } from '../../src/listings/listings-search-repository.ts';
import { createDeveloper, createKey, type Developer } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { call, expectError, expectOk, listingsApp, PHOTO, type Json } from './support.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';

const SETTLE_MS = 400;
const app = await listingsApp(t, { SYNC_SETTLE_MS: String(SETTLE_MS) });
// Time is the subject: sort=updated_at lists a change once it is SYNC_SETTLE_MS old.
const settle = (ms = SETTLE_MS + 50) => sleep(ms);

interface Seller extends Developer {
  sandbox: string;
  live: string;
}
async function seller(): Promise<Seller> {
  const developer = await createDeveloper(app);
  return {
    ...developer,
    sandbox: await createKey(app, developer, 'sandbox'),
    live: await createKey(app, developer, 'live'),
  };
}
const alice = await seller();
const bob = await seller();

async function create(key: string, body: Record<string, unknown>): Promise<Json> {
  const status = body.status ?? 'active';
  const res = await call(app, 'POST', '/api/v1/listings', {
    key,
    body: {
      price_cents: 1000,
      status,
      ...(status === 'active' ? { cover_image_url: PHOTO } : {}),
      ...body,
    },
  });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

const jacket = await create(alice.live, {
  title: 'Vintage denim jacket',
  brand: "Levi's",
  category: 'Outerwear',
  condition: 'excellent',
  tags: ['denim', 'vintage'],
  price_cents: 4950,
  color: 'Blue',
  size: 'M',
  impact_mode: true,
});
const boots = await create(alice.live, {
  title: 'Leather boots',
  brand: 'Dr. Martens',
  category: 'Shoes',
  condition: 'good',
  tags: ['leather'],
  price_cents: 7500,
});
const runners = await create(alice.live, {
  title: 'Running shoes',
  brand: 'Nike',
  category: 'shoes',
  condition: 'like_new',
  tags: ['running'],
  price_cents: 3000,
});
const tee = await create(alice.live, {
  title: 'Plain white tee',
  description: 'Goes well with denim.',
  category: 'Tops',
  price_cents: 1200,
});
const aliceDraft = await create(alice.live, {
  title: 'Secret denim jacket draft',
  status: 'draft',
  external_id: 'alice-draft',
});
const aliceArchived = await create(alice.live, { title: 'Old denim jacket', status: 'draft' });
await call(app, 'DELETE', `/api/v1/listings/${aliceArchived.id}`, { key: alice.live });
const skirt = await create(bob.live, {
  title: 'Denim skirt',
  brand: "LEVI'S",
  category: 'Bottoms',
  condition: 'good',
  tags: ['denim'],
  price_cents: 2500,
});
const bobDraft = await create(bob.live, { title: 'Bob denim draft', status: 'draft' });
const aliceSandbox = await create(alice.sandbox, {
  title: 'Sandbox denim jacket',
  status: 'draft',
});
const bobSandbox = await create(bob.sandbox, { title: 'Bob sandbox denim coat' });

// An end user who authorized a third app and lists through its token.
const client = await createClient(app);
const carol = await createEndUser(app);
const code = await obtainCode(new Browser(app), client, carol, { scope: 'read listings:write' });
const carolToken = JSON.parse((await exchange(app, client, code)).body).access_token as string;
const carolDraft = await create(carolToken, { title: 'Carol denim draft', status: 'draft' });

/** The ids of a search's first page (limit 100), after checking the envelope. */
async function ids(t: Json, query: string, key?: string): Promise<string[]> {
  const res = await call(app, 'GET', `/api/v1/listings?limit=100&${query}`, { key });
  const data = expectOk(t, res, 200);
  return data.map((l: Json) => l.id);
}

t.test('q: full-text over title, brand, category, tags and description', async (t) => {
  t.same(
    new Set(await ids(t, 'q=denim')),
    new Set([jacket.id, skirt.id, tee.id]),
    'the public search: live active listings only (no drafts, archived or sandbox)',
  );
  t.same(await ids(t, 'q=jackets'), [jacket.id], 'English stemming: jackets finds jacket');
  t.same(await ids(t, 'q=boot'), [boots.id], 'boot finds boots');
  t.same(await ids(t, 'q=jack'), [], 'no prefix matching');
  t.same(await ids(t, `q=${encodeURIComponent('"denim jacket"')}`), [jacket.id], 'a phrase');
  t.same(
    new Set(await ids(t, `q=${encodeURIComponent('denim -skirt -tee')}`)),
    new Set([jacket.id]),
    'a minus excludes',
  );
  t.same(
    new Set(await ids(t, `q=${encodeURIComponent('boots or skirt')}`)),
    new Set([boots.id, skirt.id]),
    'or',
  );
  t.same(await ids(t, 'q=martens'), [boots.id], 'the brand is searched');
  t.same(await ids(t, 'q=outerwear'), [jacket.id], 'the category is searched');
  t.same(await ids(t, 'q=vintage'), [jacket.id], 'the tags are searched');
  t.same(await ids(t, 'q=the'), [], 'a q of stop words only matches nothing');
});

t.test('filters: each alone and together', async (t) => {
  t.same(new Set(await ids(t, 'category=SHOES')), new Set([boots.id, runners.id]), 'category');
  t.same(new Set(await ids(t, "brand=levi's")), new Set([jacket.id, skirt.id]), 'brand');
  t.same(await ids(t, 'color=blue&size=m'), [jacket.id], 'color and size ignore case');
  t.same(
    new Set(await ids(t, 'condition=good&condition=excellent')),
    new Set([jacket.id, boots.id, skirt.id]),
    'condition: any of several',
  );
  t.same(await ids(t, 'tag=denim&tag=vintage'), [jacket.id], 'tag: every one');
  t.same(new Set(await ids(t, 'tag=denim')), new Set([jacket.id, skirt.id]), 'one tag');
  t.same(await ids(t, 'tag=Denim'), [], 'tags are exact');
  t.same(
    new Set(await ids(t, 'min_price_cents=2500&max_price_cents=4950')),
    new Set([jacket.id, skirt.id, runners.id]),
    'a price range, inclusive',
  );
  t.same(await ids(t, 'impact_mode=true'), [jacket.id], 'impact_mode');
  t.same(
    new Set(await ids(t, `seller=${bob.username}`)),
    new Set([skirt.id]),
    "seller: a username's public listings only",
  );
  t.same(await ids(t, 'seller=nobody_here'), [], 'an unknown seller: an empty page');
  t.same(
    await ids(t, 'q=denim&category=outerwear&condition=excellent&max_price_cents=5000'),
    [jacket.id],
    'a word and three filters',
  );
});

t.test('sorts: newest, price both ways, relevance', async (t) => {
  const all = [jacket, boots, runners, tee, skirt];
  const byPrice = [...all].sort((a, b) => a.price_cents - b.price_cents).map((l) => l.id);
  t.same(await ids(t, 'sort=price_asc&min_price_cents=1'), byPrice, 'price_asc');
  t.same(await ids(t, 'sort=price_desc&min_price_cents=1'), [...byPrice].reverse(), 'price_desc');
  const newest = [...all].sort((a, b) => (a.published_at < b.published_at ? 1 : -1));
  t.same(
    await ids(t, 'sort=newest&q=denim'),
    newest.filter((l) => l !== boots && l !== runners).map((l) => l.id),
    'newest with q',
  );
  const ranked = await ids(t, 'q=denim&sort=relevance');
  t.equal(ranked[ranked.length - 1], tee.id, 'a word in the description ranks below titles');
  t.same(new Set(ranked), new Set([jacket.id, skirt.id, tee.id]), 'relevance: the same matches');
});

t.test('the owner view: seller=me, every status, never anyone else', async (t) => {
  const aliceLive = [jacket, boots, runners, tee, aliceDraft, aliceArchived].map((l) => l.id);
  const res = await call(app, 'GET', '/api/v1/listings?seller=me&limit=100', { key: alice.live });
  const data = expectOk(t, res, 200, 'live');
  t.same(new Set(data.map((l: Json) => l.id)), new Set(aliceLive), "alice's live listings, all");
  t.ok(
    data.every((l: Json) => 'external_id' in l && l.api_environment === 'live'),
    "in the owner's view",
  );
  t.same(await ids(t, 'seller=me&status=draft', alice.live), [aliceDraft.id], 'status=draft');
  t.same(await ids(t, 'seller=me&status=archived', alice.live), [aliceArchived.id], 'archived');
  t.same(await ids(t, 'seller=me&q=denim&status=draft', alice.live), [aliceDraft.id], 'and q');
  t.same(
    new Set(await ids(t, 'seller=me', bob.live)),
    new Set([skirt.id, bobDraft.id]),
    "bob's key: bob's listings only",
  );
  t.same(await ids(t, 'seller=me', alice.sandbox), [aliceSandbox.id], 'a sandbox key: sandbox');
  t.same(await ids(t, 'seller=me', bob.sandbox), [bobSandbox.id], "bob's sandbox only");
  t.same(await ids(t, 'seller=me', carolToken), [carolDraft.id], "an OAuth token: its user's");
  t.same(await ids(t, 'seller=me&q=denim', carolToken), [carolDraft.id], 'and searched');
  expectError(t, await call(app, 'GET', '/api/v1/listings?seller=me'), 401, 'unauthorized');
});

t.test("a sandbox key's seller filter: its own username, or an empty page", async (t) => {
  // OpenAPI listListings `seller`: that seller's listings under the caller's usual visibility,
  // which for a sandbox key is its owner's sandbox; an unknown username gives an empty page.
  t.same(await ids(t, `seller=${alice.username}`, alice.sandbox), [aliceSandbox.id], 'its own');
  t.same(await ids(t, `seller=${alice.username}&q=denim`, alice.sandbox), [aliceSandbox.id], 'q');
  t.same(await ids(t, `seller=${bob.username}`, alice.sandbox), [], 'another seller: empty');
  t.same(await ids(t, `seller=${bob.username}&q=denim`, alice.sandbox), [], 'and searched');
  t.same(await ids(t, 'seller=nobody_here', alice.sandbox), [], 'an unknown seller: empty');
  t.same(await ids(t, 'seller=nobody_here&sort=price_asc', alice.sandbox), [], 'any order');
  t.same(await ids(t, 'seller=nobody_here'), [], 'anonymous: empty');
  t.same(await ids(t, 'seller=nobody_here', alice.live), [], 'a live key: empty');

  // The same when the matches are gathered (a walk of one row, then the GIN index).
  const gathering = new ListingsSearchRepository(app.db, { walkRows: 1, gatherRows: 300 });
  const search = async (sellerUsername: string) => {
    const page = await gathering.page({
      scope: { kind: 'seller', sellerId: alice.userId, environment: 'sandbox' },
      filters: { sellerUsername },
      sort: 'newest',
      limit: 20,
    });
    return { ids: page.rows.map((row) => row.id), via: page.via };
  };
  t.same(await search(alice.username), { ids: [aliceSandbox.id], via: 'gather' }, 'its own');
  t.same(await search(bob.username), { ids: [], via: 'gather' }, 'another seller: empty');
});

t.test("no combination shows another seller's drafts, archived or sandbox listings", async (t) => {
  const hidden = new Set([aliceDraft.id, aliceArchived.id, bobDraft.id, carolDraft.id]);
  const queries = [
    'q=denim',
    'q=draft',
    `seller=${alice.username}`,
    `seller=${bob.username}&q=denim`,
    'sort=updated_at',
    'sort=price_asc',
    'q=denim&sort=relevance',
    'seller=me',
    'seller=me&status=draft',
  ];
  const callers: [string, string | undefined][] = [
    ['anonymous', undefined],
    ['bob live', bob.live],
    ['bob sandbox', bob.sandbox],
    ['carol', carolToken],
  ];
  for (const [who, key] of callers) {
    for (const query of queries) {
      if (query.startsWith('seller=me') && !key) continue;
      const seen = await ids(t, query, key);
      const own = who.startsWith('bob') ? bobDraft.id : who === 'carol' ? carolDraft.id : '';
      const leaked = seen.filter((id) => hidden.has(id) && id !== own);
      t.same(leaked, [], `${who}, ${query}: nothing hidden`);
      if (who === 'bob sandbox')
        t.ok(
          seen.every((id) => id === bobSandbox.id),
          `${who}, ${query}: sandbox only`,
        );
    }
  }
});

/** `n` distinct words: w0, w1, ... */
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`);

t.test('bad input: a 400 naming the parameter, nothing run', async (t) => {
  const cases: [string, string][] = [
    ['sort=cheapest', '/query/sort'],
    ['sort=relevance', '/query/sort'],
    ['min_price_cents=500&max_price_cents=100', '/query/min_price_cents'],
    ['min_price_cents=0', '/query/min_price_cents'],
    [`q=${'a'.repeat(201)}`, '/query/q'],
    ['q=', '/query/q'],
    [`q=${encodeURIComponent('a b c d e f g h i')}`, '/query/q'],
    // Words as PostgreSQL's parser parts them: by punctuation and invisible characters too.
    [`q=${encodeURIComponent(words(50).join(','))}`, '/query/q'],
    [`q=${encodeURIComponent(words(30).join('\u200b'))}`, '/query/q'],
    [`q=${encodeURIComponent(words(9).join('-'))}`, '/query/q'],
    ['tag=', '/query/tag/0'],
    [`tag=${'t'.repeat(41)}`, '/query/tag/0'],
    ['condition=mint', '/query/condition/0'],
    ['status=draft', '/query/status'],
    ['seller=Alice', '/query/seller'],
    ['impact_mode=maybe', '/query/impact_mode'],
    ['updated_since=yesterday&sort=updated_at', '/query/updated_since'],
    ['updated_since=2026-02-30T00:00:00Z&sort=updated_at', '/query/updated_since'],
    ['updated_since=2026-11-20T00:00:00Z', '/query/updated_since'],
    ['q=denim&cursor=2026-11-20T00:00:00Z', '/query/cursor'],
    ['q=denim&cursor=bm90IGEgY3Vyc29y', '/query/cursor'],
    ['sort=price_asc&cursor=%7B%7D', '/query/cursor'],
  ];
  for (const [query, path] of cases) {
    expectError(
      t,
      await call(app, 'GET', `/api/v1/listings?${query}`, { key: alice.live }),
      400,
      'validation_error',
      path,
    );
  }
});

/** Every page of a search with `limit`, following next_cursor; the items in order. */
async function walk(query: string, limit: number, key?: string): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages += 1) {
    const url = `/api/v1/listings?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await call(app, 'GET', url, { key });
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(res.body)}`);
    items.push(...res.body.data);
    cursor = res.body.meta.next_cursor;
    if (cursor === null) return items;
  }
  throw new Error('more than 100 pages');
}

t.test('cursors: every order pages exactly once; a cursor serves its own query only', async (t) => {
  for (const sort of ['newest', 'price_asc', 'price_desc', 'relevance', 'updated_at']) {
    const query = `q=${encodeURIComponent('denim or shoes or tee or boots')}&sort=${sort}`;
    const whole = (await ids(t, query)).length;
    if (sort === 'updated_at') await settle(SETTLE_MS);
    const everything = await ids(t, query);
    for (const limit of [1, 2, 3]) {
      const walked = (await walk(query, limit)).map((l) => l.id);
      t.same(walked, everything, `${sort}, limit ${limit}: the same items, in order, once`);
    }
    t.ok(everything.length >= 4 && everything.length >= whole, `${sort}: ${everything.length}`);
  }
  const first = await call(app, 'GET', '/api/v1/listings?q=denim&limit=1');
  const cursor = first.body.meta.next_cursor as string;
  t.notOk(/^\d{4}-/.test(cursor), 'a search cursor is opaque');
  for (const other of [
    'q=jacket',
    'q=denim&category=tops',
    'q=denim&sort=price_asc',
    'sort=price_asc',
  ]) {
    expectError(
      t,
      await call(app, 'GET', `/api/v1/listings?${other}&cursor=${encodeURIComponent(cursor)}`),
      400,
      'validation_error',
      '/query/cursor',
    );
  }
  expectError(
    t,
    await call(app, 'GET', `/api/v1/listings?cursor=${encodeURIComponent(cursor)}`),
    400,
    'validation_error',
    '/query/cursor',
  );
  const plain = await call(app, 'GET', '/api/v1/listings?limit=1');
  t.match(plain.body.meta.next_cursor, /^\d{4}-\d{2}-\d{2}T/, 'the plain feed keeps its cursor');
});

t.test(
  'sync: sort=updated_at with updated_since, changes once settled, oldest first',
  async (t) => {
    const since = new Date(Date.now() - 1000).toISOString();
    const mine = await create(alice.live, { title: 'Sync me', status: 'draft' });
    const query = `seller=me&sort=updated_at&updated_since=${encodeURIComponent(since)}`;
    t.notOk(
      (await ids(t, query, alice.live)).includes(mine.id),
      `a change younger than ${SETTLE_MS} ms is not listed yet`,
    );
    await settle();
    const listed = await walk(query, 1, alice.live);
    t.same(
      listed.map((l) => l.id),
      [mine.id],
      'then it is, and nothing older than updated_since',
    );
    const edited = await call(app, 'PATCH', `/api/v1/listings/${aliceDraft.id}`, {
      key: alice.live,
      body: { title: 'Secret denim jacket draft, edited' },
    });
    expectOk(t, edited, 200);
    await settle();
    const after = await walk(query, 2, alice.live);
    t.same(
      after.map((l) => l.id),
      [mine.id, aliceDraft.id],
      'the edit comes after, oldest change first',
    );
    const last = after[after.length - 1];
    const again = await ids(
      t,
      `seller=me&sort=updated_at&updated_since=${encodeURIComponent(last.updated_at)}`,
      alice.live,
    );
    t.same(again, [aliceDraft.id], 'updated_since is inclusive: the last one seen comes again');
    const archived = await call(app, 'DELETE', `/api/v1/listings/${mine.id}`, { key: alice.live });
    expectOk(t, archived, 200);
    await settle();
    const owner = await walk(
      `seller=me&sort=updated_at&updated_since=${encodeURIComponent(last.updated_at)}`,
      10,
      alice.live,
    );
    t.same(
      owner.map((l) => [l.id, l.status]),
      [
        [aliceDraft.id, 'draft'],
        [mine.id, 'archived'],
      ],
      'the owner sync sees an archive',
    );
  },
);

t.test('caching: ETag and 304 on a search page, public for anonymous', async (t) => {
  const url = '/api/v1/listings?q=denim&sort=price_asc&limit=2';
  const first = await call(app, 'GET', url);
  expectOk(t, first, 200);
  t.equal(first.headers['cache-control'], 'public, max-age=5');
  const etag = first.headers.etag as string;
  t.match(etag, /^"[A-Za-z0-9_-]+"$/);
  const again = await call(app, 'GET', url, { headers: { 'if-none-match': etag } });
  t.equal(again.status, 304, 'unchanged: 304');
  t.equal(again.headers.etag, etag);
  const other = await call(app, 'GET', '/api/v1/listings?q=denim&sort=price_desc&limit=2', {
    headers: { 'if-none-match': etag },
  });
  t.equal(other.status, 200, 'another order is another answer');
  await call(app, 'PATCH', `/api/v1/listings/${skirt.id}`, {
    key: bob.live,
    body: { title: 'Denim skirt, washed' },
  });
  const changed = await call(app, 'GET', url, { headers: { 'if-none-match': etag } });
  t.equal(changed.status, 200, 'a listing in the page changed: 200');
  const ranked = '/api/v1/listings?q=denim&sort=relevance&limit=1';
  const rankedFirst = await call(app, 'GET', ranked);
  const rankedAgain = await call(app, 'GET', ranked, {
    headers: { 'if-none-match': rankedFirst.headers.etag as string },
  });
  t.equal(rankedAgain.status, 304, 'a relevance page is as cacheable (its cursor is stable)');
  // A conditional read checks the cursor as the page does: 400, never a 500 or a 304.
  for (const cursor of ['abc', 'yesterday'])
    for (const ifNoneMatch of ['"x"', '*'])
      expectError(
        t,
        await call(app, 'GET', `/api/v1/listings?cursor=${cursor}`, {
          headers: { 'if-none-match': ifNoneMatch },
        }),
        400,
        'validation_error',
        '/query/cursor',
      );
  const keyed = await call(app, 'GET', '/api/v1/listings?seller=me', { key: alice.live });
  t.equal(keyed.headers['cache-control'], 'private, no-cache');
});

t.test('the request log records the search query, secrets redacted', async (t) => {
  await call(app, 'GET', '/api/v1/listings?q=denim&tag=vintage&sort=price_asc', {
    key: alice.live,
  });
  // The log is written off the request's path: wait for its row.
  const rows = await waitUntil('the request log row', async () => {
    const found = await queryRows<{ path: string }>(
      app.db,
      sql`select path from request_logs where path like '%tag=vintage%'`,
    );
    return found.length > 0 ? found : undefined;
  }).catch(() => [] as { path: string }[]);
  t.same(
    rows.map((r) => r.path),
    ['/api/v1/listings?q=denim&tag=vintage&sort=price_asc'],
    'the query as sent',
  );
});
