/**
 * The states and transitions of OpenAPI "Listings, money and photos" (archived is terminal), row by
 * row, through the HTTP API, with the change each write announces (the event names of OpenAPI
 * "Webhooks and events").
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
  recordChanges,
} from './support.ts';

const app = await listingsApp(t);
const changes = recordChanges(app);
const seller = await createSeller(app, { live: false });
const key = seller.sandbox;

const post = (body: unknown, headers?: Record<string, string>) =>
  call(app, 'POST', '/api/v1/listings', { key, body, ...(headers ? { headers } : {}) });
const patch = (id: string, body: unknown) =>
  call(app, 'PATCH', `/api/v1/listings/${id}`, { key, body });
const del = (id: string) => call(app, 'DELETE', `/api/v1/listings/${id}`, { key });
const get = (id: string) => call(app, 'GET', `/api/v1/listings/${id}`, { key });

/** The announced changes since the last call, as [type, listing id, status]. */
const announced = async () =>
  (await changes.take()).map((c) => [c.type, c.listing.id, c.listing.status]);

async function createDraft(extra: Record<string, unknown> = {}) {
  const res = await post(listingBody(extra));
  if (res.status !== 201)
    throw new Error(`setup create failed: ${res.status} ${JSON.stringify(res.body)}`);
  await changes.take();
  return res.body.data;
}

async function createArchived() {
  const listing = await createDraft({
    external_id: `archived-${Math.random().toString(36).slice(2)}`,
  });
  const res = await del(listing.id);
  if (res.status !== 200) throw new Error(`setup archive failed: ${res.status}`);
  await changes.take();
  return res.body.data;
}

t.test('(none) -> draft: POST with status omitted or draft', async (t) => {
  const omitted = await post(listingBody());
  const a = expectOk(t, omitted, 201, 'sandbox');
  t.equal(a.status, 'draft');
  t.equal(omitted.headers.location, `/api/v1/listings/${a.id}`, 'Location of the new listing');
  t.same(await announced(), [['listing.created', a.id, 'draft']]);

  const explicit = await post(listingBody({ status: 'draft' }));
  const b = expectOk(t, explicit, 201, 'sandbox');
  t.equal(b.status, 'draft');
  t.same(await announced(), [['listing.created', b.id, 'draft']]);

  t.equal(expectOk(t, await get(a.id), 200).status, 'draft', 'stored as draft');
});

t.test('(none) -> active: POST with status active and a photo', async (t) => {
  const withCover = expectOk(
    t,
    await post(listingBody({ status: 'active', cover_image_url: PHOTO })),
    201,
  );
  t.equal(withCover.status, 'active');
  t.equal(withCover.cover_image_url, PHOTO);
  t.same(await announced(), [['listing.created', withCover.id, 'active']]);

  const withImages = expectOk(
    t,
    await post(listingBody({ status: 'active', image_urls: [PHOTO] })),
    201,
  );
  t.equal(withImages.status, 'active', 'image_urls alone is a photo');
  t.equal(withImages.cover_image_url, null, 'the cover is not derived from image_urls');
  t.same(await announced(), [['listing.created', withImages.id, 'active']]);
});

t.test('(none): POST active without a photo is 400 and writes nothing', async (t) => {
  const before = await countListings(app);
  for (const extra of [
    {},
    { cover_image_url: null },
    { image_urls: [] },
    { cover_image_url: null, image_urls: [] },
  ]) {
    expectError(
      t,
      await post(listingBody({ status: 'active', ...extra })),
      400,
      'validation_error',
      /^\/(cover_image_url|image_urls)$/,
    );
  }
  t.equal(await countListings(app), before, 'no row written');
  t.same(await announced(), [], 'no event');
});

t.test('draft <-> active through PATCH status', async (t) => {
  const draft = await createDraft();

  expectError(
    t,
    await patch(draft.id, { status: 'active' }),
    400,
    'validation_error',
    /^\/(cover_image_url|image_urls)$/,
  );
  t.equal(
    expectOk(t, await get(draft.id), 200).status,
    'draft',
    'still a draft after the refused PATCH',
  );
  t.same(await announced(), [], 'no event for a refused PATCH');

  const active = expectOk(
    t,
    await patch(draft.id, { status: 'active', cover_image_url: PHOTO }),
    200,
    'sandbox',
  );
  t.equal(active.status, 'active', 'draft -> active with a photo in the same PATCH');
  t.equal(active.id, draft.id);
  t.equal(active.published_at, draft.published_at, 'published_at never changes');
  t.same(await announced(), [['listing.updated', draft.id, 'active']]);

  const back = expectOk(t, await patch(draft.id, { status: 'draft' }), 200);
  t.equal(back.status, 'draft', 'active -> draft');
  t.same(await announced(), [['listing.updated', draft.id, 'draft']]);

  const again = expectOk(t, await patch(draft.id, { status: 'active' }), 200);
  t.equal(again.status, 'active', 'draft -> active with the stored photo');
  t.same(await announced(), [['listing.updated', draft.id, 'active']]);

  const fieldsOnly = expectOk(t, await patch(draft.id, { title: 'Renamed listing' }), 200);
  t.equal(fieldsOnly.status, 'active', 'a PATCH without status keeps it');
  t.equal(fieldsOnly.title, 'Renamed listing');
  t.same(await announced(), [['listing.updated', draft.id, 'active']]);
});

t.test('active: PATCH removing the last photo is 400 and changes nothing', async (t) => {
  const listing = expectOk(
    t,
    await post(listingBody({ status: 'active', cover_image_url: PHOTO, image_urls: [PHOTO] })),
    201,
  );
  await changes.take();

  expectError(
    t,
    await patch(listing.id, { cover_image_url: null, image_urls: [] }),
    400,
    'validation_error',
    /^\/(cover_image_url|image_urls)$/,
  );
  const stored = expectOk(t, await get(listing.id), 200);
  t.equal(stored.status, 'active');
  t.equal(stored.cover_image_url, PHOTO, 'cover kept');
  t.same(stored.image_urls, [PHOTO], 'images kept');
  t.same(await announced(), [], 'no event');

  const coverGone = expectOk(t, await patch(listing.id, { cover_image_url: null }), 200);
  t.equal(coverGone.status, 'active', 'image_urls still hold a photo');
  t.equal(coverGone.cover_image_url, null);
  await changes.take();
  expectError(
    t,
    await patch(listing.id, { image_urls: [] }),
    400,
    'validation_error',
    /^\/(cover_image_url|image_urls)$/,
  );
  t.same(expectOk(t, await get(listing.id), 200).image_urls, [PHOTO], 'the last photo stays');

  const unpublished = expectOk(
    t,
    await patch(listing.id, { status: 'draft', image_urls: [] }),
    200,
  );
  t.equal(unpublished.status, 'draft', 'a draft may have no photo');
  t.same(unpublished.image_urls, []);
});

t.test('draft|active -> archived through DELETE, the archived listing returned', async (t) => {
  const draft = await createDraft();
  const archivedDraft = expectOk(t, await del(draft.id), 200, 'sandbox');
  t.equal(archivedDraft.id, draft.id);
  t.equal(archivedDraft.status, 'archived');
  t.equal(archivedDraft.title, draft.title, 'the whole listing is returned');
  t.equal(archivedDraft.api_environment, 'sandbox', 'owner view');
  t.same(await announced(), [['listing.archived', draft.id, 'archived']]);

  const active = expectOk(
    t,
    await post(listingBody({ status: 'active', cover_image_url: PHOTO })),
    201,
  );
  await changes.take();
  const archivedActive = expectOk(t, await del(active.id), 200);
  t.equal(archivedActive.status, 'archived');
  t.same(await announced(), [['listing.archived', active.id, 'archived']]);
  t.equal(
    expectOk(t, await get(active.id), 200).status,
    'archived',
    'the owner still sees it, archived',
  );
});

t.test('archived: DELETE again returns it (200) and announces nothing', async (t) => {
  const archived = await createArchived();
  const again = expectOk(t, await del(archived.id), 200);
  t.same(again, archived, 'the same listing, unchanged (updated_at included)');
  t.same(await announced(), [], 'no second listing.archived');
});

t.test('archived: PATCH is 409 conflict, whatever the body', async (t) => {
  const archived = await createArchived();
  for (const body of [
    { title: 'Revived title' },
    { status: 'draft' },
    { status: 'active', cover_image_url: PHOTO },
  ]) {
    expectError(t, await patch(archived.id, body), 409, 'conflict');
  }
  t.same(expectOk(t, await get(archived.id), 200), archived, 'unchanged');
  t.same(await announced(), [], 'no event');
});

t.test('PATCH status archived is 400 validation_error (DELETE archives)', async (t) => {
  const draft = await createDraft();
  expectError(t, await patch(draft.id, { status: 'archived' }), 400, 'validation_error', '/status');
  t.equal(expectOk(t, await get(draft.id), 200).status, 'draft');
  t.same(await announced(), [], 'no event');
});

t.test('POST status archived is 400 validation_error', async (t) => {
  const before = await countListings(app);
  expectError(
    t,
    await post(listingBody({ status: 'archived' })),
    400,
    'validation_error',
    '/status',
  );
  t.equal(await countListings(app), before);
});

t.test(
  'upsert (existing external_id): 200, same listing, status unchanged unless the body sets it',
  async (t) => {
    const externalId = 'sku-upsert-1';
    const created = expectOk(
      t,
      await post(
        listingBody({
          external_id: externalId,
          status: 'active',
          cover_image_url: PHOTO,
          brand: 'Acme',
        }),
      ),
      201,
    );
    t.same(await announced(), [['listing.created', created.id, 'active']]);
    const rows = await countListings(app);

    const upserted = expectOk(
      t,
      await post({ title: 'Upserted title', price_cents: 4242, external_id: externalId }),
      200,
      'sandbox',
    );
    t.equal(upserted.id, created.id, 'same listing');
    t.equal(upserted.status, 'active', 'status unchanged: the body did not set it');
    t.equal(upserted.title, 'Upserted title', 'fields sent replace the stored ones');
    t.equal(upserted.price_cents, 4242);
    t.equal(upserted.brand, 'Acme', 'fields not sent keep their values (no defaults on an upsert)');
    t.equal(upserted.cover_image_url, PHOTO);
    t.equal(upserted.published_at, created.published_at);
    t.same(
      await announced(),
      [['listing.updated', created.id, 'active']],
      'listing.updated, not listing.created',
    );
    t.equal(await countListings(app), rows, 'no duplicate row');

    const toDraft = expectOk(
      t,
      await post({
        title: 'Upserted title',
        price_cents: 4242,
        external_id: externalId,
        status: 'draft',
      }),
      200,
    );
    t.equal(toDraft.status, 'draft', 'status changes when the body sets it');
    t.same(await announced(), [['listing.updated', created.id, 'draft']]);

    const kept = expectOk(
      t,
      await post({ title: 'Upserted again', price_dollars: 1.5, external_id: externalId }),
      200,
    );
    t.equal(kept.status, 'draft', 'a draft stays a draft (the create default does not apply)');
    t.equal(kept.price_cents, 150);
    t.same(await announced(), [['listing.updated', created.id, 'draft']]);
    t.equal(await countListings(app), rows, 'still no duplicate row');
  },
);

t.test('PATCH and upsert replace tags and image_urls as sent, in order', async (t) => {
  const urls = ['https://images.example.com/b.jpg', 'https://images.example.com/a.jpg'];
  const created = expectOk(
    t,
    await post(listingBody({ external_id: 'sku-arrays', tags: ['one'], image_urls: [PHOTO] })),
    201,
  );
  const patched = expectOk(
    t,
    await patch(created.id, { tags: ['zeta', 'alpha', 'mid'], image_urls: urls }),
    200,
  );
  t.same(patched.tags, ['zeta', 'alpha', 'mid']);
  t.same(patched.image_urls, urls);
  const upserted = expectOk(
    t,
    await post(listingBody({ external_id: 'sku-arrays', tags: ['b', 'a'], image_urls: [] })),
    200,
  );
  t.same(upserted.tags, ['b', 'a']);
  t.same(upserted.image_urls, []);
  const cleared = expectOk(t, await patch(created.id, { tags: [] }), 200);
  t.same(cleared.tags, []);
  t.same(expectOk(t, await get(created.id), 200).tags, [], 'stored');
  await changes.take();
});

t.test('upsert through the Idempotency-Key header', async (t) => {
  const headers = { 'idempotency-key': 'idem-key-1' };
  const first = await post(listingBody(), headers);
  const created = expectOk(t, first, 201);
  t.equal(first.body.meta.idempotency_key, 'idem-key-1', 'meta.idempotency_key echoes the header');
  t.equal(created.external_id, 'idem-key-1', 'the header is stored as external_id');
  t.same(await announced(), [['listing.created', created.id, 'draft']]);

  const repeat = await post(listingBody(), headers);
  const same = expectOk(t, repeat, 200);
  t.equal(same.id, created.id);
  t.equal(repeat.body.meta.idempotency_key, 'idem-key-1');
  t.same(await announced(), [['listing.updated', created.id, 'draft']]);

  const bodyOnly = expectOk(t, await post(listingBody({ external_id: 'idem-key-1' })), 200);
  t.equal(bodyOnly.id, created.id, 'the body external_id and the header name the same listing');
  t.same(await announced(), [['listing.updated', created.id, 'draft']]);

  const noHeader = await post(listingBody());
  expectOk(t, noHeader, 201);
  t.notOk('idempotency_key' in noHeader.body.meta, 'no meta.idempotency_key without the header');
  await changes.take();
});

t.test('upsert that would make a listing active without a photo is 400', async (t) => {
  const draft = await createDraft({ external_id: 'sku-no-photo' });
  expectError(
    t,
    await post(listingBody({ external_id: 'sku-no-photo', status: 'active' })),
    400,
    'validation_error',
    /^\/(cover_image_url|image_urls)$/,
  );
  t.equal(expectOk(t, await get(draft.id), 200).status, 'draft');
  t.same(await announced(), []);
});

t.test('upsert of an archived listing is 409 conflict and writes nothing', async (t) => {
  const archived = await createArchived();
  const rows = await countListings(app);
  expectError(t, await post(listingBody({ external_id: archived.external_id })), 409, 'conflict');
  expectError(
    t,
    await post(listingBody(), { 'idempotency-key': archived.external_id }),
    409,
    'conflict',
  );
  expectError(
    t,
    await post(listingBody({ external_id: archived.external_id, status: 'draft' })),
    409,
    'conflict',
  );
  t.equal(await countListings(app), rows, 'no new row');
  t.same(expectOk(t, await get(archived.id), 200), archived, 'unchanged');
  t.same(await announced(), [], 'no event');
});

t.test('external_id is per seller and environment: the same id elsewhere creates', async (t) => {
  const other = await createSeller(app);
  const mine = expectOk(t, await post(listingBody({ external_id: 'shared-sku' })), 201);
  const theirs = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: other.sandbox,
      body: listingBody({ external_id: 'shared-sku' }),
    }),
    201,
  );
  const theirLive = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: other.live,
      body: listingBody({ external_id: 'shared-sku' }),
    }),
    201,
    'live',
  );
  t.not(theirs.id, mine.id, 'another seller: a new listing');
  t.not(theirLive.id, theirs.id, 'another environment: a new listing');
  t.same(
    (await announced()).map(([type]) => type),
    ['listing.created', 'listing.created', 'listing.created'],
  );
});

t.test('PATCH external_id onto one the seller already uses is 409 conflict', async (t) => {
  await createDraft({ external_id: 'taken-sku' });
  const other = await createDraft({ external_id: 'free-sku' });
  expectError(t, await patch(other.id, { external_id: 'taken-sku' }), 409, 'conflict');
  t.equal(expectOk(t, await get(other.id), 200).external_id, 'free-sku');
  t.same(await announced(), []);
});
