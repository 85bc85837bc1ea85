/**
 * The document's limits and the money and id rules of OpenAPI "Listings, money and photos", each at
 * its boundary (accepted) and just past it (400 validation_error naming the field, nothing
 * written).
 */
import t from 'tap';
import { listingBody } from '../helpers/listings.ts';
import {
  call,
  countListings,
  createSeller,
  expectError,
  expectOk,
  listingsApp,
  PHOTO,
  type Answer,
  type Asserts,
} from './support.ts';

const app = await listingsApp(t);
const seller = await createSeller(app, { live: false });
const key = seller.sandbox;

const post = (body: unknown, headers?: Record<string, string>) =>
  call(app, 'POST', '/api/v1/listings', { key, body, ...(headers ? { headers } : {}) });
const batch = (items: unknown[]) =>
  call(app, 'POST', '/api/v1/listings/batch', { key, body: { items } });
const feed = (query: string) => call(app, 'GET', `/api/v1/listings?${query}`, { key });

/**
 * `n` characters (code points: a 2-unit emoji counts once, spec "lengths count Unicode code
 * points").
 */
const text = (n: number, unit = 'x') => unit.repeat(n);

/** Expects a 400 naming `path`, and that no listing was written. */
async function refused(t: Asserts, send: () => Promise<Answer>, path: string | RegExp) {
  const before = await countListings(app);
  expectError(t, await send(), 400, 'validation_error', path);
  t.equal(await countListings(app), before, 'nothing written');
}

t.before(async () => {
  // Enough listings to tell limit=100 from a smaller page.
  for (let i = 0; i < 5; i += 1) {
    const res = await batch(Array.from({ length: 25 }, () => listingBody()));
    if (res.status !== 200) throw new Error(`setup batch failed: ${res.status}`);
  }
});

t.test(
  'GET /listings limit: 1 and 100 accepted, 0 / 101 / 1.5 / abc refused at /query/limit',
  async (t) => {
    const one = await feed('limit=1');
    expectOk(t, one, 200, 'sandbox');
    t.equal(one.body.data.length, 1);
    t.equal(one.body.meta.count, 1);

    const hundred = await feed('limit=100');
    expectOk(t, hundred, 200);
    t.equal(hundred.body.data.length, 100);
    t.equal(hundred.body.meta.count, 100);

    const defaulted = await feed('');
    t.equal(defaulted.body.data.length, 24, 'default 24');

    for (const bad of ['0', '101', '1.5', 'abc', '-1', '']) {
      expectError(t, await feed(`limit=${bad}`), 400, 'validation_error', '/query/limit');
    }
  },
);

t.test('title: 3 and 120 accepted, 2 and 121 refused at /title', async (t) => {
  t.equal(expectOk(t, await post(listingBody({ title: text(3) })), 201).title, text(3));
  t.equal(expectOk(t, await post(listingBody({ title: text(120) })), 201).title, text(120));
  t.equal(
    expectOk(t, await post(listingBody({ title: text(120, '👗') })), 201).title,
    text(120, '👗'),
    '120 code points (240 UTF-16 units)',
  );
  await refused(t, () => post(listingBody({ title: text(2) })), '/title');
  await refused(t, () => post(listingBody({ title: text(121) })), '/title');
  await refused(t, () => post(listingBody({ title: text(121, '👗') })), '/title');
});

t.test('description: 5000 accepted, 5001 refused at /description', async (t) => {
  t.equal(
    expectOk(t, await post(listingBody({ description: text(5000) })), 201).description.length,
    5000,
  );
  await refused(t, () => post(listingBody({ description: text(5001) })), '/description');
});

for (const field of ['category', 'brand', 'size', 'color']) {
  t.test(`${field}: 80 accepted, 81 refused at /${field}`, async (t) => {
    t.equal(expectOk(t, await post(listingBody({ [field]: text(80) })), 201)[field], text(80));
    await refused(t, () => post(listingBody({ [field]: text(81) })), `/${field}`);
  });
}

t.test('tags: 20 entries of 40 chars accepted; 21 entries or a 41-char tag refused', async (t) => {
  const twenty = Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(40, 't'));
  t.same(
    expectOk(t, await post(listingBody({ tags: twenty })), 201).tags,
    twenty,
    'stored as sent, in order',
  );
  await refused(t, () => post(listingBody({ tags: [...twenty, 'one-more'] })), '/tags');
  await refused(t, () => post(listingBody({ tags: ['ok', text(41)] })), '/tags/1');
});

t.test('image_urls: 16 accepted, 17 refused at /image_urls', async (t) => {
  const urls = (n: number) =>
    Array.from({ length: n }, (_, i) => `https://images.example.com/${i}.jpg`);
  t.same(
    expectOk(t, await post(listingBody({ status: 'active', image_urls: urls(16) })), 201)
      .image_urls,
    urls(16),
  );
  await refused(
    t,
    () => post(listingBody({ status: 'active', image_urls: urls(17) })),
    '/image_urls',
  );
});

t.test('external_id: 128 accepted, 129 refused at /external_id', async (t) => {
  t.equal(
    expectOk(t, await post(listingBody({ external_id: text(128, 'e') })), 201).external_id,
    text(128, 'e'),
  );
  await refused(t, () => post(listingBody({ external_id: text(129, 'f') })), '/external_id');
  await refused(t, () => post(listingBody({ external_id: '' })), '/external_id');
});

t.test('Idempotency-Key: 128 accepted, 129 refused at /headers/idempotency-key', async (t) => {
  const ok = await post(listingBody(), { 'idempotency-key': text(128, 'k') });
  t.equal(expectOk(t, ok, 201).external_id, text(128, 'k'));
  t.equal(ok.body.meta.idempotency_key, text(128, 'k'));
  await refused(
    t,
    () => post(listingBody(), { 'idempotency-key': text(129, 'h') }),
    '/headers/idempotency-key',
  );
});

t.test(
  'Idempotency-Key and body external_id: equal accepted, different refused at /external_id',
  async (t) => {
    const equal = await post(listingBody({ external_id: 'same-id' }), {
      'idempotency-key': 'same-id',
    });
    t.equal(expectOk(t, equal, 201).external_id, 'same-id');
    await refused(
      t,
      () => post(listingBody({ external_id: 'body-id' }), { 'idempotency-key': 'header-id' }),
      '/external_id',
    );
  },
);

t.test('batch: 25 items accepted; 26 or 0 refused for the whole request at /items', async (t) => {
  const full = await batch(Array.from({ length: 25 }, () => listingBody()));
  expectOk(t, full, 200, 'sandbox');
  t.equal(full.body.data.results.length, 25);
  t.equal(full.body.meta.created, 25);
  t.equal(full.body.meta.max_per_request, 25);

  await refused(t, () => batch(Array.from({ length: 26 }, () => listingBody())), '/items');
  await refused(t, () => batch([]), '/items');
});

t.test(
  'price_dollars: exact conversion; a third decimal, both prices or neither refused',
  async (t) => {
    t.equal(
      expectOk(t, await post({ title: 'Dollar price', price_dollars: 19.99 }), 201).price_cents,
      1999,
    );
    t.equal(
      expectOk(t, await post({ title: 'Dollar price', price_dollars: 0.07 }), 201).price_cents,
      7,
    );
    t.equal(
      expectOk(t, await post({ title: 'Dollar price', price_dollars: 0.01 }), 201).price_cents,
      1,
      'smallest amount',
    );
    t.equal(
      expectOk(t, await post({ title: 'Dollar price', price_dollars: 12.5 }), 201).price_cents,
      1250,
    );
    t.equal(
      expectOk(t, await post({ title: 'Dollar price', price_dollars: 999999.99 }), 201).price_cents,
      99999999,
      'largest amount',
    );
    t.equal(expectOk(t, await post({ title: 'Cent price', price_cents: 1 }), 201).price_cents, 1);
    t.equal(
      expectOk(t, await post({ title: 'Cent price', price_cents: 99999999 }), 201).price_cents,
      99999999,
    );

    await refused(t, () => post({ title: 'Dollar price', price_dollars: 1.005 }), '/price_dollars');
    await refused(
      t,
      () => post({ title: 'Dollar price', price_dollars: 19.999 }),
      '/price_dollars',
    );
    await refused(t, () => post({ title: 'Dollar price', price_dollars: 0 }), '/price_dollars');
    await refused(t, () => post({ title: 'Dollar price', price_dollars: -1 }), '/price_dollars');
    await refused(
      t,
      () => post({ title: 'Dollar price', price_dollars: 1000000 }),
      '/price_dollars',
    );
    await refused(
      t,
      () => post({ title: 'Dollar price', price_dollars: '19.99' }),
      '/price_dollars',
    );
    await refused(t, () => post({ title: 'Cent price', price_cents: 0 }), '/price_cents');
    await refused(t, () => post({ title: 'Cent price', price_cents: 100000000 }), '/price_cents');
    await refused(t, () => post({ title: 'Cent price', price_cents: 1.5 }), '/price_cents');
    await refused(
      t,
      () => post({ title: 'Both prices', price_cents: 1999, price_dollars: 19.99 }),
      /^\/price_(cents|dollars)$/,
    );
    await refused(t, () => post({ title: 'No price' }), /^\/price_(cents|dollars)$/);
  },
);

t.test('PATCH obeys the same limits', async (t) => {
  const listing = expectOk(
    t,
    await post(listingBody({ status: 'active', cover_image_url: PHOTO })),
    201,
  );
  const patch = (body: unknown) =>
    call(app, 'PATCH', `/api/v1/listings/${listing.id}`, { key, body });
  t.equal(expectOk(t, await patch({ price_dollars: 19.99 }), 200).price_cents, 1999);
  const twenty = Array.from({ length: 20 }, (_, i) => `tag-${i}`);
  t.same(expectOk(t, await patch({ tags: twenty }), 200).tags, twenty);
  expectError(t, await patch({ title: text(121) }), 400, 'validation_error', '/title');
  expectError(t, await patch({ tags: [...twenty, 'x'] }), 400, 'validation_error', '/tags');
  expectError(t, await patch({ price_dollars: 1.005 }), 400, 'validation_error', '/price_dollars');
  expectError(
    t,
    await patch({ price_cents: 100, price_dollars: 1 }),
    400,
    'validation_error',
    /^\/price_(cents|dollars)$/,
  );
  expectError(t, await patch({}), 400, 'validation_error');
  const stored = expectOk(
    t,
    await call(app, 'GET', `/api/v1/listings/${listing.id}`, { key }),
    200,
  );
  t.equal(stored.price_cents, 1999, 'refused PATCHes changed nothing');
  t.same(stored.tags, twenty);
});
