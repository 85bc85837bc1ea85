/**
 * POST /listings/batch (OpenAPI "Batch"): index-ordered per-item results, meta counts,
 * items independent of each other, in-batch upserts, 422 when all fail, and the app's
 * sandbox_listing milestone that gates live keys.
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  call,
  countListings,
  createSeller,
  expectError,
  expectOk,
  listingsApp,
  PHOTO,
  recordChanges,
  type Answer,
  type Asserts,
  type Json,
} from './support.ts';

const app = await listingsApp(t);
const changes = recordChanges(app);
const seller = await createSeller(app);

const batch = (items: unknown, key = seller.sandbox) =>
  call(app, 'POST', '/api/v1/listings/batch', { key, body: { items } });
const get = (id: string, key = seller.sandbox) =>
  call(app, 'GET', `/api/v1/listings/${id}`, { key });

/** The batch envelope: one result per index, in order, each a success or a failure. */
function checkShape(t: Asserts, res: Answer, total: number): Json[] {
  t.equal(res.body?.error, undefined, 'a batch answer, not an error envelope');
  const results: Json[] = res.body?.data?.results ?? [];
  t.equal(results.length, total, 'one result per item');
  results.forEach((result, i) => {
    t.equal(result.index, i, `result ${i} has index ${i}`);
    if (result.ok === true) {
      t.ok([200, 201].includes(result.status), `result ${i}: success status 200 or 201`);
      t.equal(typeof result.data?.id, 'string', `result ${i}: data is a listing`);
      t.equal(result.error, undefined);
    } else {
      t.equal(result.ok, false);
      t.ok(result.status >= 400 && result.status < 500, `result ${i}: failure status 4xx`);
      t.equal(typeof result.error?.code, 'string', `result ${i}: error.code`);
      t.equal(typeof result.error?.message, 'string', `result ${i}: error.message`);
      t.equal(result.data, undefined);
    }
  });
  const meta = res.body?.meta ?? {};
  t.equal(meta.version, 'v1');
  t.equal(meta.request_id, res.headers['x-request-id']);
  t.equal(meta.total, total, 'meta.total');
  t.equal(meta.max_per_request, 25, 'meta.max_per_request');
  t.equal(
    meta.created,
    results.filter((r) => r.ok && r.status === 201).length,
    'meta.created counts 201 results',
  );
  t.equal(
    meta.updated,
    results.filter((r) => r.ok && r.status === 200).length,
    'meta.updated counts 200 results',
  );
  t.equal(meta.failed, results.filter((r) => !r.ok).length, 'meta.failed counts failures');
  return results;
}

t.test('mixed batch: per-index results, counts, failures never undo successes', async (t) => {
  const rows = await countListings(app);
  await changes.take();
  const items = [
    listingBody({ title: 'Batch draft' }),
    listingBody({ title: 'ab' }), // title too short
    listingBody({ title: 'Batch active', status: 'active', image_urls: [PHOTO] }),
    listingBody({ status: 'active' }), // active without a photo
    listingBody({ title: 'Batch sku first', external_id: 'batch-sku-1', brand: 'Acme' }),
    listingBody({ colour: 'red' }), // unknown field
    // upserts index 4
    { title: 'Batch sku again', price_dollars: 19.99, external_id: 'batch-sku-1' },
    listingBody({ price_dollars: 1.005 }), // third decimal
    { title: 'No price here' },
  ];
  const res = await batch(items);
  t.equal(res.status, 200, 'at least one item succeeded');
  t.equal(res.body.meta.environment, 'sandbox');
  const results = checkShape(t, res, items.length);

  t.same(
    results.map((r) => [r.ok, r.status]),
    [
      [true, 201],
      [false, 400],
      [true, 201],
      [false, 400],
      [true, 201],
      [false, 400],
      [true, 200],
      [false, 400],
      [false, 400],
    ],
    'outcome of each index',
  );
  t.same([res.body.meta.created, res.body.meta.updated, res.body.meta.failed], [3, 1, 5]);

  const paths = (i: number) => (results[i].error?.details ?? []).map((d: Json) => d.path);
  t.equal(results[1].error.code, 'validation_error');
  t.same(paths(1), ['/title'], 'item details paths are relative to the item');
  t.equal(results[3].error.code, 'validation_error');
  t.match(paths(3).join(), /^\/(cover_image_url|image_urls)/);
  t.same(paths(5), ['/colour']);
  t.same(paths(7), ['/price_dollars']);
  t.match(paths(8).join(), /\/price_(cents|dollars)/);

  t.equal(results[0].data.status, 'draft');
  t.equal(results[2].data.status, 'active');
  t.equal(
    results[6].data.id,
    results[4].data.id,
    'a later item with the same external_id upserts the earlier one',
  );
  t.equal(results[6].data.title, 'Batch sku again');
  t.equal(results[6].data.price_cents, 1999);
  t.equal(results[6].data.brand, 'Acme', 'fields the upsert did not send are kept');
  t.equal(results[4].data.external_id, 'batch-sku-1', 'owner view in results');
  t.equal(results[4].data.api_environment, 'sandbox');

  t.equal(await countListings(app), rows + 3, 'exactly the three created listings were written');
  for (const i of [0, 2, 4]) {
    t.equal(
      expectOk(t, await get(results[i].data.id), 200).id,
      results[i].data.id,
      `item ${i} is stored`,
    );
  }
  t.equal(
    expectOk(t, await get(results[4].data.id), 200).title,
    'Batch sku again',
    'the upsert is stored',
  );

  const announced = (await changes.take()).map((c) => [c.type, c.listing.id]);
  t.same(
    announced,
    [
      ['listing.created', results[0].data.id],
      ['listing.created', results[2].data.id],
      ['listing.created', results[4].data.id],
      ['listing.updated', results[4].data.id],
    ],
    'created for each new listing, updated (not created) for the in-batch upsert, in index order',
  );
  const published = [0, 2, 4].map((i) => results[i].data.published_at);
  t.ok(
    published[0] < published[1] && published[1] < published[2],
    'later items are newer (index order)',
  );
});

t.test('a batch item upserting an existing listing: 200 and listing.updated', async (t) => {
  const existing = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: seller.sandbox,
      body: listingBody({ external_id: 'pre-existing', status: 'active', cover_image_url: PHOTO }),
    }),
    201,
  );
  await changes.take();
  const res = await batch([
    { title: 'Upserted in a batch', price_cents: 321, external_id: 'pre-existing' },
    listingBody(),
  ]);
  const results = checkShape(t, res, 2);
  t.equal(res.status, 200);
  t.same(
    results.map((r) => r.status),
    [200, 201],
  );
  t.equal(results[0].data.id, existing.id);
  t.equal(results[0].data.status, 'active', 'status unchanged: not sent');
  t.same(
    (await changes.take()).map((c) => c.type),
    ['listing.updated', 'listing.created'],
  );
});

t.test('an archived external_id fails its item with 409; the others go through', async (t) => {
  const archived = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: seller.sandbox,
      body: listingBody({ external_id: 'archived-sku' }),
    }),
    201,
  );
  expectOk(
    t,
    await call(app, 'DELETE', `/api/v1/listings/${archived.id}`, { key: seller.sandbox }),
    200,
  );
  await changes.take();
  const res = await batch([
    listingBody(),
    listingBody({ external_id: 'archived-sku' }),
    listingBody(),
  ]);
  t.equal(res.status, 200);
  const results = checkShape(t, res, 3);
  t.same(
    results.map((r) => r.status),
    [201, 409, 201],
  );
  t.equal(results[1].error.code, 'conflict');
  t.equal(expectOk(t, await get(archived.id), 200).status, 'archived', 'still archived, unchanged');
  t.same(
    (await changes.take()).map((c) => c.type),
    ['listing.created', 'listing.created'],
  );
});

t.test(
  'an item the database cannot store (U+0000) fails alone with 400, not the whole batch',
  async (t) => {
    const res = await batch([
      listingBody(),
      listingBody({ title: 'nul\u0000byte' }),
      listingBody({ tags: ['ok', 'bad\u0000'] }),
    ]);
    t.equal(res.status, 200);
    const results = checkShape(t, res, 3);
    t.same(
      results.map((r) => r.status),
      [201, 400, 400],
    );
    t.same(
      results[1].error.details.map((d: Json) => d.path),
      ['/title'],
    );
    t.same(
      results[2].error.details.map((d: Json) => d.path),
      ['/tags/1'],
    );
    await changes.take();
  },
);

t.test('every item failing: 422 with the same body shape, nothing written', async (t) => {
  const rows = await countListings(app);
  await changes.take();
  const items = [
    listingBody({ title: 'no' }),
    listingBody({ status: 'active' }),
    { title: 'Both prices', price_cents: 100, price_dollars: 1 },
  ];
  const res = await batch(items);
  t.equal(res.status, 422);
  const results = checkShape(t, res, 3);
  t.same(
    results.map((r) => [r.ok, r.status, r.error?.code]),
    [
      [false, 400, 'validation_error'],
      [false, 400, 'validation_error'],
      [false, 400, 'validation_error'],
    ],
  );
  t.same([res.body.meta.created, res.body.meta.updated, res.body.meta.failed], [0, 0, 3]);
  t.equal(await countListings(app), rows, 'nothing written');
  t.same(await changes.take(), [], 'nothing announced');
});

t.test('the request as a whole: 400 when it is not { items: [1-25 entries] }', async (t) => {
  const rows = await countListings(app);
  for (const [label, body, path] of [
    ['no items', {}, '/items'],
    ['items not an array', { items: listingBody() }, '/items'],
    ['empty items', { items: [] }, '/items'],
    ['26 items', { items: Array.from({ length: 26 }, () => listingBody()) }, '/items'],
    ['another top-level field', { items: [listingBody()], dry_run: true }, '/dry_run'],
    ['not an object', [listingBody()], ''],
  ] as const) {
    const res = await call(app, 'POST', '/api/v1/listings/batch', { key: seller.sandbox, body });
    expectError(t, res, 400, 'validation_error', path);
    t.pass(label);
  }
  t.equal(await countListings(app), rows, 'nothing written');
});

t.test('live batch: created in the live environment', async (t) => {
  const res = await batch([listingBody({ status: 'active', cover_image_url: PHOTO })], seller.live);
  t.equal(res.status, 200);
  t.equal(res.body.meta.environment, 'live');
  const [result] = checkShape(t, res, 1);
  t.equal(result.data.api_environment, 'live');
  const publicView = expectOk(
    t,
    await call(app, 'GET', `/api/v1/listings/${result.data.id}`),
    200,
    'live',
  );
  t.notOk('external_id' in publicView, 'the public sees no owner fields');
});

t.test(
  'a sandbox batch create completes the sandbox_listing milestone; live keys follow',
  async (t) => {
    const developer = await createDeveloper(app);
    const sandbox = await createKey(app, developer, 'sandbox');
    const milestone = async () =>
      (await app.services.apps.show(developer.appId)).milestones.sandbox_listing;

    t.same(await milestone(), { done: false, completed_at: null }, 'not done for a new app');
    await t.rejects(
      app.services.keys.create({ appId: developer.appId, env: 'live' }),
      { message: /sandbox_listing/ },
      'a live key is refused, naming the milestone',
    );

    const failing = await batch([listingBody({ title: 'no' })], sandbox);
    t.equal(failing.status, 422);
    t.equal((await milestone()).done, false, 'a batch where every item failed completes nothing');

    const res = await batch([listingBody({ title: 'no' }), listingBody()], sandbox);
    t.equal(res.status, 200);
    const done = await milestone();
    t.equal(done.done, true, 'done after a sandbox batch create');
    t.ok(
      done.completed_at !== null && !Number.isNaN(Date.parse(done.completed_at)),
      'completed_at is a timestamp',
    );

    const live = await app.services.keys.create({ appId: developer.appId, env: 'live' });
    t.match(live.key, /^svc_live_/, 'a live key can now be created');
    const created = await call(app, 'POST', '/api/v1/listings', {
      key: live.key,
      body: listingBody(),
    });
    t.equal(created.status, 201, 'and it works');
  },
);

t.test(
  'the milestone is completed for the app whose credential created, not another',
  async (t) => {
    const first = await createDeveloper(app);
    const firstKey = await createKey(app, first, 'sandbox');
    const res = await batch([listingBody()], firstKey);
    t.equal(res.status, 200);
    const other = await createDeveloper(app);
    t.equal((await app.services.apps.show(first.appId)).milestones.sandbox_listing.done, true);
    t.equal(
      (await app.services.apps.show(other.appId)).milestones.sandbox_listing.done,
      false,
      'another app is not affected',
    );
  },
);
