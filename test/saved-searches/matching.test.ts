/**
 * Saved searches push (OpenAPI "Saved searches"): a listing that becomes visible to a saved
 * search and matches it sends the search's app one listing.matched, by webhook (a real HTTPS
 * receiver, signatures verified) and in GET /api/v1/events; once per listing and search; a
 * listing that stops matching and matches again sends again; drafts, archived listings and
 * other developers' sandbox listings never match.
 */
import t from 'tap';
import { listingBody } from '../helpers/listings.ts';
import { counterValue } from '../helpers/metrics.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from '../webhooks/support.ts';
import { drained, publish, save, searcher } from './support.ts';

const app = await webhooksApp(t, { METRICS_TOKEN: 'metrics-token-for-tests' });
const receiver = await startReceiver(t);
const alerts = await searcher(app);
const seller = await searcher(app);
await createEndpoint(app, receiver, { appId: alerts.appId, env: 'live', path: '/live' });
await createEndpoint(app, receiver, { appId: alerts.appId, env: 'sandbox', path: '/sandbox' });

const barbour = await save(app, alerts.live, {
  q: 'jacket',
  brand: 'Barbour',
  size: 'M',
  max_price_cents: 8000,
});

/** The listing.matched events the receiver got at `path` about one listing. */
const heard = (path: string, listingId: string) =>
  receiver
    .to(path)
    .filter((r) => r.event?.type === 'listing.matched')
    .map((r) => r.event as Json)
    .filter((e) => e.data.listing.id === listingId);

/** Lets the matcher finish every write made so far: the queue is empty and its pass done. */
const matched = () => drained(app);

const jacket = {
  title: 'Barbour Bedale waxed jacket',
  brand: 'barbour',
  size: 'm',
  price_cents: 7500,
  status: 'active',
  cover_image_url: 'https://images.example.com/a.jpg',
};

t.test('a published match is announced once, by webhook and in /events', async (t) => {
  const res = await api(app, 'POST', '/api/v1/listings', seller.live, listingBody(jacket));
  t.equal(res.status, 201);
  const id = res.body.data.id;
  await waitUntil('listing.matched at /live', () => heard('/live', id).length > 0);
  const [event] = heard('/live', id);
  t.equal(event.data.saved_search_id, barbour.id);
  t.equal(event.data.listing.title, jacket.title);
  t.notOk('external_id' in event.data.listing, "another seller's listing: the public view");
  // An edit that keeps it matching sends nothing more.
  const edited = await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, {
    price_cents: 7000,
  });
  t.equal(edited.status, 200);
  await matched();
  t.equal(heard('/live', id).length, 1, 'once per listing and saved search');
  const events = await api(app, 'GET', '/api/v1/events?type=listing.matched', alerts.live);
  t.equal(events.status, 200);
  t.equal(
    events.body.data.filter((e: Json) => e.data.listing.id === id).length,
    1,
    'listed once in /events',
  );
  const search = await api(app, 'GET', `/api/v1/saved_searches/${barbour.id}`, alerts.live);
  t.ok(search.body.data.last_matched_at, 'last_matched_at is set');
});

t.test('no match, a draft, then edited into a match and out and in again', async (t) => {
  const res = await api(
    app,
    'POST',
    '/api/v1/listings',
    seller.live,
    listingBody({ ...jacket, price_cents: 9900, status: 'draft' }),
  );
  const id = res.body.data.id;
  await matched();
  t.equal(heard('/live', id).length, 0, 'a draft does not match');
  await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, { status: 'active' });
  await matched();
  t.equal(heard('/live', id).length, 0, 'too dear: no match');
  await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, { price_cents: 7900 });
  await waitUntil('listing.matched at /live', () => heard('/live', id).length === 1);
  t.pass('edited into a match: announced');
  await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, { size: 'L' });
  await matched();
  await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, { size: 'M' });
  await waitUntil('listing.matched at /live', () => heard('/live', id).length === 2);
  t.pass('stopped matching, matched again: announced again');
  await api(app, 'DELETE', `/api/v1/listings/${id}`, seller.live);
  await matched();
  t.equal(heard('/live', id).length, 2, 'archived: nothing');
});

t.test('sandbox searches match their developer’s sandbox listings only', async (t) => {
  const mine = await save(app, alerts.sandbox, { q: 'lamp' });
  const other = await api(
    app,
    'POST',
    '/api/v1/listings',
    seller.sandbox,
    listingBody({ title: 'Brass lamp', status: 'draft' }),
  );
  const own = await publish(app, alerts.sandbox, { title: 'Brass lamp' });
  await waitUntil('listing.matched at /sandbox', () => heard('/sandbox', own.id).length === 1);
  const [event] = heard('/sandbox', own.id);
  t.equal(event.data.saved_search_id, mine.id);
  t.equal(event.data.listing.external_id, null, 'its own listing: the owner view');
  await api(app, 'PATCH', `/api/v1/listings/${other.body.data.id}`, seller.sandbox, {
    status: 'active',
    cover_image_url: 'https://images.example.com/l.jpg',
  });
  await matched();
  t.equal(heard('/sandbox', other.body.data.id).length, 0, "another developer's sandbox");
  t.equal(heard('/live', own.id).length, 0, 'a sandbox listing is no live match');
});

t.test('a deleted saved search matches nothing more', async (t) => {
  const gone = await save(app, alerts.live, { brand: 'Belstaff' });
  const del = await api(app, 'DELETE', `/api/v1/saved_searches/${gone.id}`, alerts.live);
  t.equal(del.status, 204);
  const res = await api(
    app,
    'POST',
    '/api/v1/listings',
    seller.live,
    listingBody({ ...jacket, brand: 'Belstaff' }),
  );
  await matched();
  t.equal(heard('/live', res.body.data.id).length, 0);
});

t.test('a write no saved search could match examines none of them', async (t) => {
  // Many saved searches, none keyed by anything the listing below has.
  for (let i = 0; i < 50; i += 1) await save(app, alerts.live, { q: `parka${i}`, size: 'XL' });
  await matched();
  const before = {
    listings: await counterValue(app, 'saved_search_listings_total'),
    examined: await counterValue(app, 'saved_search_candidates_total'),
  };
  await publish(app, seller.live, { title: 'Ceramic teapot' });
  await matched();
  t.equal(
    (await counterValue(app, 'saved_search_listings_total')) - before.listings,
    1,
    'one write',
  );
  t.equal(
    (await counterValue(app, 'saved_search_candidates_total')) - before.examined,
    0,
    'none examined',
  );
  const hit = await api(
    app,
    'POST',
    '/api/v1/listings',
    seller.live,
    listingBody({ ...jacket, title: 'Parka7 in XL', size: 'XL', brand: null }),
  );
  t.equal(hit.status, 201);
  await waitUntil('listing.matched at /live', () => heard('/live', hit.body.data.id).length === 1);
  t.equal(
    (await counterValue(app, 'saved_search_candidates_total')) - before.examined,
    1,
    'one write that one saved search could match examines that one',
  );
});

t.test('a write examines only the saved searches whose price range holds its price', async (t) => {
  // Many searches of one brand, each for a price range the listing below is outside of: the
  // keys carry the range (saved_search_keys_price_idx), so none of them is a candidate.
  for (let i = 0; i < 30; i += 1) {
    const low = i < 15;
    await save(app, alerts.live, {
      brand: 'Filson',
      ...(low ? { max_price_cents: 1000 + i } : { min_price_cents: 90_000 + i }),
    });
  }
  const inRange = await save(app, alerts.live, {
    brand: 'Filson',
    min_price_cents: 5000,
    max_price_cents: 5000,
  });
  await matched();
  const before = await counterValue(app, 'saved_search_candidates_total');
  const res = await api(
    app,
    'POST',
    '/api/v1/listings',
    seller.live,
    listingBody({ ...jacket, title: 'Filson tin cloth bag', brand: 'filson', price_cents: 5000 }),
  );
  t.equal(res.status, 201);
  await waitUntil('listing.matched at /live', () => heard('/live', res.body.data.id).length === 1);
  t.equal(heard('/live', res.body.data.id)[0].data.saved_search_id, inRange.id, 'the one in range');
  t.equal(
    (await counterValue(app, 'saved_search_candidates_total')) - before,
    1,
    'one examined of the 31 searches of its brand',
  );
});
