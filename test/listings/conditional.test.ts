/**
 * Cacheable reads (the document's "Caching and conditional requests"): GET /listings and
 * GET /listings/{id} send a strong ETag that changes whenever what the answer holds changes (a
 * listing edited, its seller renamed, a listing published, the caller's view), never because of
 * the request id; If-None-Match answers 304 without a body; anonymous answers are public for 5
 * seconds, credentialed ones private; a listing the caller cannot see stays 404. Two sellers and
 * two credentials on the same data.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { call, createSeller, listingsApp, PHOTO, type Answer } from './support.ts';

const app = await listingsApp(t);
const seller = await createSeller(app);
const rival = await createSeller(app);

const create = async (key: string, body: Record<string, unknown>) => {
  const res = await call(app, 'POST', '/api/v1/listings', { key, body });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { id: string };
};
const active = { price_cents: 1500, status: 'active', cover_image_url: PHOTO };
const live = await create(seller.live, { title: 'Wool coat', ...active });
await create(rival.live, { title: 'Rival boots', ...active });
const draft = await create(seller.live, { title: 'Draft scarf', price_cents: 900 });

const get = (url: string, options: { key?: string; ifNoneMatch?: string } = {}) =>
  call(app, 'GET', url, {
    ...(options.key ? { key: options.key } : {}),
    ...(options.ifNoneMatch ? { headers: { 'if-none-match': options.ifNoneMatch } } : {}),
  });
const etag = (res: Answer) => String(res.headers.etag);
const FEED = '/api/v1/listings?limit=5';
const ONE = `/api/v1/listings/${live.id}`;

t.test('200: a strong ETag, public caching for anonymous, private for a key', async (t) => {
  for (const url of [FEED, ONE]) {
    const anonymous = await get(url);
    t.equal(anonymous.status, 200);
    t.match(etag(anonymous), /^"[A-Za-z0-9_-]{22}"$/, `${url}: a strong ETag`);
    t.equal(anonymous.headers['cache-control'], 'public, max-age=5', `${url}: anonymous, public`);
    t.equal(anonymous.headers.vary, 'Authorization');
    const again = await get(url);
    t.not(again.body.meta.request_id, anonymous.body.meta.request_id, 'another request id');
    t.equal(etag(again), etag(anonymous), `${url}: the same answer, the same ETag`);
    const keyed = await get(url, { key: rival.live });
    t.equal(keyed.headers['cache-control'], 'private, no-cache', `${url}: a key, private`);
    t.equal(keyed.headers.vary, 'Authorization');
  }
});

t.test('304: no body, the same ETag and caching headers', async (t) => {
  for (const url of [FEED, ONE]) {
    const first = await get(url);
    for (const ifNoneMatch of [etag(first), `W/${etag(first)}`, `"nope", ${etag(first)}`, '*']) {
      const res = await get(url, { ifNoneMatch });
      t.equal(res.status, 304, `${url}, If-None-Match: ${ifNoneMatch}`);
      t.equal(res.body, null, 'no body');
      t.equal(etag(res), etag(first));
      t.equal(res.headers['cache-control'], 'public, max-age=5');
      t.ok(res.headers['x-request-id'], 'a request id still');
    }
    const other = await get(url, { ifNoneMatch: '"something-else"' });
    t.equal(other.status, 200, `${url}: another ETag, the answer`);
  }
});

t.test('the owner, another seller and anonymous: one ETag per view', async (t) => {
  const anonymous = await get(ONE);
  const owner = await get(ONE, { key: seller.live });
  const other = await get(ONE, { key: rival.live });
  t.ok('external_id' in owner.body.data, "the owner's view");
  t.not(etag(owner), etag(anonymous), "the owner's view has its own ETag");
  t.equal(etag(other), etag(anonymous), 'another seller sees what anonymous sees: the same ETag');
  t.equal(
    (await get(ONE, { key: seller.live, ifNoneMatch: etag(anonymous) })).status,
    200,
    "the public view's ETag does not validate the owner's view",
  );
  const sandboxFeed = await get(FEED, { key: seller.sandbox });
  t.not(etag(sandboxFeed), etag(await get(FEED)), 'a sandbox feed is another answer');
});

t.test('what changes the answer changes the ETag', async (t) => {
  const before = { feed: etag(await get(FEED)), one: etag(await get(ONE)) };

  const edited = await call(app, 'PATCH', ONE, {
    key: seller.live,
    body: { title: 'Wool coat, navy' },
  });
  t.equal(edited.status, 200);
  const afterEdit = {
    feed: await get(FEED, { ifNoneMatch: before.feed }),
    one: await get(ONE, { ifNoneMatch: before.one }),
  };
  t.equal(afterEdit.feed.status, 200, 'edited: the feed is answered again');
  t.equal(afterEdit.one.status, 200, 'edited: the listing is answered again');
  t.equal(afterEdit.one.body.data.title, 'Wool coat, navy');

  await app.db.execute(
    sql`update users set display_name = 'Renamed seller' where id = ${seller.userId}`,
  );
  const afterRename = await get(ONE, { ifNoneMatch: etag(afterEdit.one) });
  t.equal(afterRename.status, 200, "the seller's new name is a new answer");
  t.equal(afterRename.body.data.seller.display_name, 'Renamed seller');
  const feedAfterRename = await get(FEED, { ifNoneMatch: etag(afterEdit.feed) });
  t.equal(feedAfterRename.status, 200, 'in the feed too');

  await create(rival.live, { title: 'Newest listing', ...active });
  const afterPublish = await get(FEED, { ifNoneMatch: etag(feedAfterRename) });
  t.equal(afterPublish.status, 200, 'a new listing on the page: a new answer');
  t.equal(afterPublish.body.data[0].title, 'Newest listing');
  t.equal(
    (await get(FEED, { ifNoneMatch: etag(afterPublish) })).status,
    304,
    'and then unchanged again',
  );
});

t.test('a listing the caller cannot see is 404, whatever If-None-Match says', async (t) => {
  const url = `/api/v1/listings/${draft.id}`;
  const owner = await get(url, { key: seller.live });
  t.equal(owner.status, 200, 'the owner sees the draft');
  for (const ifNoneMatch of [etag(owner), '*']) {
    t.equal((await get(url, { ifNoneMatch })).status, 404, `anonymous, ${ifNoneMatch}: 404`);
    t.equal(
      (await get(url, { key: rival.live, ifNoneMatch })).status,
      404,
      `another seller, ${ifNoneMatch}: 404`,
    );
  }
  t.equal((await get(url, { key: seller.live, ifNoneMatch: '*' })).status, 304, 'the owner: 304');

  const archived = await call(app, 'DELETE', ONE, { key: seller.live });
  t.equal(archived.status, 200);
  t.equal((await get(ONE, { ifNoneMatch: '*' })).status, 404, 'archived: 404 for anonymous');
});

t.test('If-None-Match is checked like any header: too long is a 400 naming it', async (t) => {
  const res = await get(FEED, { ifNoneMatch: `"${'a'.repeat(3000)}"` });
  t.equal(res.status, 400);
  t.match(JSON.stringify(res.body.error), /if-none-match/i);
});
