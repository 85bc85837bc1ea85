/**
 * Who gets a listing's events, seen from the outside with two apps of one seller, an app of
 * another developer authorized by two end users, and a real HTTPS receiver:
 *
 * - every event of a listing goes to the app whose credential created it, whichever credential
 *   makes the later change (another app of the seller, the seller's OAuth token in another app);
 *   the acting app, when it is another one, gets nothing (OpenAPI "Webhooks and events");
 * - GET /api/v1/events with an OAuth token shows only the events about its user's listings
 *   (never another user's drafts, no pings); an API key sees all of its app's events;
 * - an upsert or replay that changes nothing changes nothing: 200, same updated_at, no event.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  type Client,
  type EndUser,
} from '../oauth/support.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const app = await webhooksApp(t);
const receiver = await startReceiver(t);

// The seller: a developer with two apps (a shop-sync integration and another tool of theirs).
const seller = await createDeveloper(app);
const syncKey = await createKey(app, seller, 'sandbox');
const syncLiveKey = await createKey(app, seller, 'live');
await app.services.apps.approve(seller.appId);
const otherApp = await app.services.apps.create({
  ownerUsername: seller.username,
  name: 'Another tool of the seller',
});
const otherKey = (await app.services.keys.create({ appId: otherApp.id, env: 'sandbox' })).key;
await createEndpoint(app, receiver, { appId: seller.appId, path: '/sync' });
await createEndpoint(app, receiver, { appId: seller.appId, env: 'live', path: '/sync-live' });
await createEndpoint(app, receiver, { appId: otherApp.id, path: '/other' });

// A third-party app (another developer's), authorized by end users through the real OAuth flow.
const client = await createClient(app);
await app.services.apps.approve(client.clientId);
const clientEndpoint = await createEndpoint(app, receiver, {
  appId: client.clientId,
  env: 'live',
  path: '/client',
});
await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
const clientLiveKey = (await app.services.keys.create({ appId: client.clientId, env: 'live' })).key;

async function tokenFor(
  user: EndUser,
  scope: string,
  oauthClient: Client = client,
): Promise<string> {
  const code = await obtainCode(new Browser(app), oauthClient, user, { scope });
  const res = await exchange(app, oauthClient, code);
  if (res.statusCode !== 200) throw new Error(`token: ${res.statusCode} ${res.body}`);
  return JSON.parse(res.body).access_token;
}

/** The events recorded about a listing: for which app, of which type. */
async function eventsOf(listingId: string): Promise<{ app: string; type: string }[]> {
  const rows = await queryRows<{ app: string; type: string }>(
    app.db,
    sql`select app_id::text as app, type from webhook_events where listing_id = ${listingId} order by created_at`,
  );
  return rows.map((row) => ({ ...row }));
}
const receivedAt = (path: string, listingId: string) =>
  receiver
    .to(path)
    .filter((r) => (r.event?.data as Json)?.listing?.id === listingId)
    .map((r) => r.event!.type);

t.test(
  'another app of the same seller changes the listing: the creating app hears of it',
  async (t) => {
    const created = await api(
      app,
      'POST',
      '/api/v1/listings',
      syncKey,
      listingBody({ external_id: 'sync-1' }),
    );
    t.equal(created.status, 201);
    const id = created.body.data.id;
    t.equal(
      (
        await api(app, 'PATCH', `/api/v1/listings/${id}`, otherKey, {
          title: 'Edited in the other tool',
        })
      ).status,
      200,
    );
    const upsert = await api(
      app,
      'POST',
      '/api/v1/listings',
      otherKey,
      listingBody({ external_id: 'sync-1', price_cents: 4321 }),
    );
    t.equal(
      upsert.status,
      200,
      'the other app upserts the same external_id (same seller and environment)',
    );
    t.equal((await api(app, 'DELETE', `/api/v1/listings/${id}`, otherKey)).status, 200);

    const expected = ['listing.created', 'listing.updated', 'listing.updated', 'listing.archived'];
    t.strictSame(
      await eventsOf(id),
      expected.map((type) => ({ app: seller.appId, type })),
      'every event recorded for the creating app, none for the acting one',
    );
    await waitUntil(
      'the four deliveries to the creating app',
      () => receivedAt('/sync', id).length >= 4,
    );
    t.strictSame(
      receivedAt('/sync', id).sort(),
      [...expected].sort(),
      "the creating app's endpoint received all four",
    );

    const syncEvents = await api(app, 'GET', '/api/v1/events?limit=100', syncKey);
    t.strictSame(
      syncEvents.body.data.filter((e: Json) => e.data.listing?.id === id).map((e: Json) => e.type),
      [...expected].reverse(),
      "and the creating app's /events lists them",
    );
    const otherEvents = await api(app, 'GET', '/api/v1/events?limit=100', otherKey);
    t.strictSame(
      otherEvents.body.data.filter((e: Json) => e.data.listing?.id === id),
      [],
      "the acting app's /events does not",
    );
    t.strictSame(
      receivedAt('/other', id),
      [],
      'nor its endpoint (no delivery was even recorded for it, checked above)',
    );
  },
);

t.test(
  "the seller's OAuth token in another developer's app changes a listing: the creating app hears of it",
  async (t) => {
    const sellerUser: EndUser = {
      id: seller.userId,
      username: seller.username,
      password: seller.password,
      email: '',
    };
    const token = await tokenFor(sellerUser, 'read listings:write');
    const created = await api(app, 'POST', '/api/v1/listings', syncLiveKey, listingBody());
    t.equal(created.status, 201);
    const id = created.body.data.id;
    const patched = await api(app, 'PATCH', `/api/v1/listings/${id}`, token, {
      description: 'Edited through another app',
    });
    t.equal(patched.status, 200, 'the token acts as the seller, in live');
    t.strictSame(await eventsOf(id), [
      { app: seller.appId, type: 'listing.created' },
      { app: seller.appId, type: 'listing.updated' },
    ]);
    await waitUntil(
      'both deliveries to the live endpoint of the creating app',
      () => receivedAt('/sync-live', id).length >= 2,
    );
    t.strictSame(receivedAt('/client', id), [], "the acting app's endpoint gets nothing");
    const seen = await api(app, 'GET', '/api/v1/events?limit=100', token);
    t.strictSame(
      seen.body.data.filter((e: Json) => e.data.listing?.id === id),
      [],
      'nor its /events (the events belong to the creating app)',
    );
  },
);

t.test('GET /api/v1/events: an OAuth token sees only its own user’s listings', async (t) => {
  const alice = await createEndUser(app);
  const bob = await createEndUser(app);
  const aliceWrite = await tokenFor(alice, 'read listings:write');
  const aliceRead = await tokenFor(alice, 'read');
  const bobWrite = await tokenFor(bob, 'read listings:write');

  const aliceDraft = await api(
    app,
    'POST',
    '/api/v1/listings',
    aliceWrite,
    listingBody({ external_id: 'alice-1', description: "Alice's private draft" }),
  );
  const bobDraft = await api(
    app,
    'POST',
    '/api/v1/listings',
    bobWrite,
    listingBody({ external_id: 'bob-1', description: "Bob's private draft" }),
  );
  t.equal(aliceDraft.status, 201);
  t.equal(bobDraft.status, 201);
  await api(app, 'PATCH', `/api/v1/listings/${bobDraft.body.data.id}`, bobWrite, {
    title: 'Bob renamed his draft',
  });
  await app.services.endpoints.ping(clientEndpoint.id);

  for (const [who, token] of [
    ['read-only', aliceRead],
    ['read + write', aliceWrite],
  ] as const) {
    const res = await api(app, 'GET', '/api/v1/events?limit=100', token);
    t.equal(res.status, 200);
    const events: Json[] = res.body.data;
    t.strictSame(
      events.map((e) => [e.type, e.data.listing?.external_id]),
      [['listing.created', 'alice-1']],
      `Alice's ${who} token: her listing's event only`,
    );
    t.notOk(JSON.stringify(events).includes("Bob's private draft"), "never Bob's draft");
  }
  const pings = await api(app, 'GET', '/api/v1/events?type=ping', aliceRead);
  t.strictSame(pings.body.data, [], 'no pings for a token');
  const bobs = await api(app, 'GET', '/api/v1/events?limit=100', bobWrite);
  t.strictSame(
    bobs.body.data.map((e: Json) => [e.type, e.data.listing?.external_id]),
    [
      ['listing.updated', 'bob-1'],
      ['listing.created', 'bob-1'],
    ],
    "Bob's token: his two events",
  );
  // Paging stays exact under the filter.
  const first = await api(app, 'GET', '/api/v1/events?limit=1', bobWrite);
  const second = await api(
    app,
    'GET',
    `/api/v1/events?limit=1&cursor=${encodeURIComponent(first.body.meta.next_cursor)}`,
    bobWrite,
  );
  t.strictSame(
    [first.body.data[0].type, second.body.data[0].type, second.body.meta.next_cursor],
    ['listing.updated', 'listing.created', null],
  );

  const all = await api(app, 'GET', '/api/v1/events?limit=100', clientLiveKey);
  t.strictSame(
    all.body.data.map((e: Json) => [e.type, e.data.listing?.external_id ?? e.data.message]).sort(),
    [
      ['listing.created', 'alice-1'],
      ['listing.created', 'bob-1'],
      ['listing.updated', 'bob-1'],
      ['ping', all.body.data.find((e: Json) => e.type === 'ping')?.data.message],
    ].sort(),
    "the app's API key sees every event of the app, pings included",
  );
});

t.test('an upsert or replay that changes nothing changes nothing', async (t) => {
  const body = listingBody({
    description: 'Same every time',
    tags: ['wool', 'coat'],
    image_urls: ['https://img.example.com/1.jpg'],
  });
  const created = await api(app, 'POST', '/api/v1/listings', syncKey, body, {
    'idempotency-key': 'replay-1',
  });
  t.equal(created.status, 201);
  const id = created.body.data.id;

  const replay = await api(app, 'POST', '/api/v1/listings', syncKey, body, {
    'idempotency-key': 'replay-1',
  });
  t.equal(replay.status, 200, 'a replay answers 200');
  t.strictSame(replay.body.data, created.body.data, 'with the listing as it was: same updated_at');
  t.equal(replay.body.meta.idempotency_key, 'replay-1');
  const sameBodyExplicitDraft = await api(app, 'POST', '/api/v1/listings', syncKey, {
    ...body,
    external_id: 'replay-1',
    status: 'draft',
  });
  t.equal(
    sameBodyExplicitDraft.body.data.updated_at,
    created.body.data.updated_at,
    'the status it already has is no change either',
  );
  const batch = await api(app, 'POST', '/api/v1/listings/batch', syncKey, {
    items: [{ ...body, external_id: 'replay-1' }],
  });
  t.match(
    batch.body.meta,
    { created: 0, updated: 1, failed: 0 },
    'a batch replay is an upsert result (200)',
  );
  t.equal(
    batch.body.data.results[0].data.updated_at,
    created.body.data.updated_at,
    'that changed nothing',
  );
  t.strictSame(
    (await eventsOf(id)).map((e) => e.type),
    ['listing.created'],
    'no listing.updated recorded',
  );

  const changed = await api(
    app,
    'POST',
    '/api/v1/listings',
    syncKey,
    { ...body, tags: ['wool'] },
    { 'idempotency-key': 'replay-1' },
  );
  t.equal(changed.status, 200);
  t.not(
    changed.body.data.updated_at,
    created.body.data.updated_at,
    'a replay that changes a field is an update',
  );
  t.strictSame(changed.body.data.tags, ['wool']);
  const activated = await api(
    app,
    'POST',
    '/api/v1/listings',
    syncKey,
    { ...body, tags: ['wool'], status: 'active' },
    { 'idempotency-key': 'replay-1' },
  );
  t.equal(activated.body.data.status, 'active', 'and so is one that changes the status');
  t.strictSame(
    (await eventsOf(id)).map((e) => e.type),
    ['listing.created', 'listing.updated', 'listing.updated'],
  );
  await waitUntil('the three deliveries', () => receivedAt('/sync', id).length >= 3);
  t.equal(
    receivedAt('/sync', id).length,
    3,
    'delivered: the create and the two real updates, nothing for the replays',
  );

  await api(app, 'DELETE', `/api/v1/listings/${id}`, syncKey);
  const archivedReplay = await api(
    app,
    'POST',
    '/api/v1/listings',
    syncKey,
    { ...body, tags: ['wool'] },
    { 'idempotency-key': 'replay-1' },
  );
  t.equal(archivedReplay.status, 409, 'a replay on an archived listing is still a conflict');
});

t.test('GET /api/v1/events?wait=: a token waits only for its own user’s events', async (t) => {
  const carol = await createEndUser(app);
  const dave = await createEndUser(app);
  const carolToken = await tokenFor(carol, 'read listings:write');
  const daveToken = await tokenFor(dave, 'read listings:write');
  const start = await api(app, 'GET', '/api/v1/events?wait=0', carolToken);
  const cursor = encodeURIComponent(start.body.meta.next_cursor);
  // Dave's listing (same app, same environment) does not answer Carol's wait.
  const quiet = api(app, 'GET', `/api/v1/events?wait=1&cursor=${cursor}`, carolToken);
  await api(app, 'POST', '/api/v1/listings', daveToken, listingBody({ external_id: 'dave-1' }));
  const empty = await quiet;
  t.equal(empty.status, 200);
  t.strictSame(empty.body.data, [], "Dave's listing does not answer Carol's wait");
  t.equal(empty.body.meta.next_cursor, start.body.meta.next_cursor, 'her cursor, unchanged');
  // Her own does, and only it is listed.
  const waiting = api(app, 'GET', `/api/v1/events?wait=20&cursor=${cursor}`, carolToken);
  await api(app, 'POST', '/api/v1/listings', carolToken, listingBody({ external_id: 'carol-1' }));
  const answer = await waiting;
  t.strictSame(
    answer.body.data.map((e: Json) => [e.type, e.data.listing.external_id]),
    [['listing.created', 'carol-1']],
    "her listing's event, never Dave's",
  );
});
