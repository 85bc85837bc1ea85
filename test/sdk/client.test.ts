/**
 * The SDK (sdk/src) against the running server over real HTTP: the end-to-end paths of an
 * integration (docs/sdk.md), so the client's generated types are proven against what the
 * server sends. API keys and an OAuth token from the real authorization flow, Idempotency-Key
 * upserts, cursor iteration (the plain feed, searches with filters and sorts, the owner view,
 * a sync loop), batch, typed errors with their codes, events, and a real webhook delivery
 * verified with the SDK's helper.
 */
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import {
  apiKeyAuth,
  createMarketplaceClient,
  isMarketplaceApiError,
  keyEnvironment,
  oauthTokenAuth,
  refreshAccessToken,
  verifyWebhook,
  WebhookVerificationError,
  type Listing,
  type ListingCreate,
  type ListListingsQuery,
  type MarketplaceClient,
} from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { Browser } from '../helpers/browser.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';
import { rejection } from './support.ts';

// Sync (sort=updated_at) lists a change once SYNC_SETTLE_MS old: short here, so the loop is quick.
const SETTLE_MS = 300;
const { app, baseUrl } = await listeningApp(t, {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  SYNC_SETTLE_MS: String(SETTLE_MS),
});
const developer = await createDeveloper(app);
const sandboxKey = await createKey(app, developer, 'sandbox');
const sandbox = createMarketplaceClient({
  baseUrl,
  auth: apiKeyAuth(sandboxKey),
  headers: { 'user-agent': 'sdk-test/1.0' },
});
const anonymous = createMarketplaceClient({ baseUrl });

const PHOTO = 'https://images.example.com/listings/sdk.jpg';
let serial = 0;
const body = (overrides: Partial<ListingCreate> = {}): ListingCreate => ({
  title: `SDK listing ${(serial += 1)}`,
  price_cents: 1000 + serial,
  ...overrides,
});

t.test('anonymous: health and the public feed', async (t) => {
  const health = await anonymous.health({ db: true });
  t.equal(health.data.ok, true);
  t.equal(health.data.db, true);
  t.equal(health.meta.version, 'v1');
  const page = await anonymous.listings.list({ limit: 5 });
  t.equal(page.meta.environment, 'live');
  t.equal(page.meta.count, page.data.length);
});

t.test('credentials: prefixes are checked before anything is sent', async (t) => {
  t.equal(keyEnvironment(sandboxKey), 'sandbox');
  t.throws(() => apiKeyAuth('svc_oauth_abc'), TypeError);
  t.throws(() => apiKeyAuth('svc_sandbox_short'), TypeError);
  t.throws(() => oauthTokenAuth(sandboxKey), TypeError);
  const forged = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(`svc_sandbox_${'x'.repeat(40)}`),
  });
  const error = await rejection(t, forged.me());
  t.equal(error.status, 401);
  t.equal(error.code, 'unauthorized');
  t.ok(error.is('unauthorized'));
  t.match(error.requestId, /^req_/);
  t.throws(
    () => createMarketplaceClient({ baseUrl: `${baseUrl}/api/v1` }),
    TypeError,
    'baseUrl is the host only',
  );
});

t.test(
  'the docs/sdk.md walkthrough: create with an Idempotency-Key, retry, publish, page, archive',
  async (t) => {
    const first = await sandbox.listings.create(body({ tags: ['denim'] }), {
      idempotencyKey: 'sdk-jacket-42',
    });
    t.equal(first.created, true, '201 on creation');
    t.equal(first.data.external_id, 'sdk-jacket-42', 'the key is stored as external_id');
    t.equal(first.data.status, 'draft');
    t.equal(first.meta.environment, 'sandbox');
    t.equal(first.meta.idempotency_key, 'sdk-jacket-42', 'meta echoes the key');

    const retry = await sandbox.listings.create(body({ title: 'Vintage denim jacket' }), {
      idempotencyKey: 'sdk-jacket-42',
    });
    t.equal(retry.created, false, 'a retry with the same key upserts (200)');
    t.equal(retry.data.id, first.data.id, 'the same listing');
    t.equal(retry.data.title, 'Vintage denim jacket');

    const active = await sandbox.listings.update(first.data.id, {
      status: 'active',
      cover_image_url: PHOTO,
    });
    t.equal(active.data.status, 'active');
    const read = await sandbox.listings.get(first.data.id);
    t.equal(read.data.cover_image_url, PHOTO);

    const archived = await sandbox.listings.archive(first.data.id);
    t.equal(archived.data.status, 'archived');
    const conflict = await rejection(
      t,
      sandbox.listings.update(first.data.id, { title: 'Too late' }),
    );
    t.equal(conflict.status, 409);
    t.equal(conflict.code, 'conflict', 'archived is terminal');

    const missing = await rejection(
      t,
      sandbox.listings.get('00000000-0000-4000-8000-000000000000'),
    );
    t.ok(isMarketplaceApiError(missing, 'not_found'));
    t.equal(missing.status, 404);
  },
);

t.test('cursor iteration visits the whole sandbox feed once, newest first', async (t) => {
  const seller = await createDeveloper(app);
  const client = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(await createKey(app, seller, 'sandbox')),
  });
  const created: string[] = [];
  for (let i = 0; i < 7; i += 1) created.push((await client.listings.create(body())).data.id);

  const seen: Listing[] = [];
  for await (const listing of client.listings.iterate({ limit: 3 })) seen.push(listing);
  t.same(
    seen.map((l) => l.id),
    [...created].reverse(),
    'every listing once, newest first',
  );
  t.ok(
    seen.every((l, i) => i === 0 || l.published_at < seen[i - 1]!.published_at),
    'published_at strictly descending',
  );

  const pages = [];
  for await (const page of client.listings.pages({ limit: 3 })) pages.push(page.meta);
  t.same(
    pages.map((m) => m.count),
    [3, 3, 1],
    'pages of 3, 3 and 1',
  );
  t.equal(pages.at(-1)!.next_cursor, null, 'the last page says null');

  const bad = await rejection(t, client.listings.list({ limit: 101 }));
  t.equal(bad.code, 'validation_error');
  t.equal(bad.status, 400);
  t.ok(
    bad.details.some((d) => d.path === '/query/limit'),
    'details point at /query/limit',
  );
});

/** A client of a new developer's key that records the URL of every request it sends. */
async function recordingClient(env: 'sandbox' | 'live') {
  const seller = await createDeveloper(app);
  const urls: URL[] = [];
  const client = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(await createKey(app, seller, env)),
    middleware: [
      {
        onRequest: ({ request }) => {
          urls.push(new URL(request.url));
        },
      },
    ],
  });
  return { seller, client, urls };
}

// Time is the subject: sort=updated_at lists a change once it is SYNC_SETTLE_MS old.
const settle = () => sleep(SETTLE_MS + 100);

t.test(
  'search: iterate() with q, repeated filters and a sort pages every match once',
  async (t) => {
    const { client, urls } = await recordingClient('sandbox');
    const make = async (overrides: Partial<ListingCreate>) =>
      (await client.listings.create(body(overrides))).data;
    const match = (title: string, price_cents: number, condition: 'like_new' | 'excellent') =>
      make({ title, price_cents, condition, tags: ['denim', 'vintage', 'blue'] });
    // Created in this order, so published_at rises with it: equal prices page oldest first.
    const matches = [
      await match('Denim jacket, cropped', 4500, 'like_new'),
      await match('Trucker jacket', 2500, 'excellent'),
      await match('Denim jacket, oversized', 7900, 'like_new'),
      await match('Sherpa jacket', 4500, 'excellent'),
      await match('Jacket with a hood', 8000, 'like_new'),
      await match('Denim work jacket', 1200, 'excellent'),
      await match('Jean jacket', 4500, 'like_new'),
    ];
    const tags = ['denim', 'vintage'];
    // Each of these misses by one thing: the keyword, the condition, a tag, the price.
    await make({ title: 'Denim skirt', price_cents: 3000, condition: 'like_new', tags });
    await make({ title: 'Jacket, worn', price_cents: 3000, condition: 'good', tags });
    await make({ title: 'Jacket', price_cents: 3000, condition: 'excellent', tags: ['denim'] });
    await make({ title: 'Dear jacket', price_cents: 8001, condition: 'excellent', tags });

    const byPrice = [...matches]
      .map((listing, order) => ({ listing, order }))
      .sort((a, b) => a.listing.price_cents - b.listing.price_cents || a.order - b.order)
      .map(({ listing }) => listing.id);
    // Typed from the document: `sort: 'cheapest'` or `condition: ['mint']` would not compile.
    const search: ListListingsQuery = {
      q: 'jacket',
      tag: tags,
      condition: ['like_new', 'excellent'],
      max_price_cents: 8000,
      sort: 'price_asc',
    };

    urls.length = 0;
    const seen: Listing[] = [];
    for await (const listing of client.listings.iterate({ ...search, limit: 2 }))
      seen.push(listing);
    t.same(
      seen.map((l) => l.id),
      byPrice,
      'every match once, cheapest first, equal prices oldest first',
    );
    t.equal(urls.length, 4, 'four pages of 2, 2, 2 and 1');
    urls.forEach((url, page) => {
      const params = url.searchParams;
      t.same(params.getAll('tag'), tags, `page ${page + 1}: tag=denim&tag=vintage, repeated`);
      t.same(params.getAll('condition'), search.condition!, `page ${page + 1}: condition repeated`);
      t.same(
        [params.get('q'), params.get('sort'), params.get('max_price_cents'), params.get('limit')],
        ['jacket', 'price_asc', '8000', '2'],
        `page ${page + 1}: the same q, filters, sort and limit`,
      );
      t.equal(params.has('cursor'), page > 0, `page ${page + 1}: ${page ? 'a' : 'no'} cursor`);
    });

    const pages = [];
    for await (const page of client.listings.pages({ ...search, limit: 3 })) pages.push(page.meta);
    t.same(
      pages.map((m) => m.count),
      [3, 3, 1],
      'pages(): 3, 3 and 1',
    );
    t.ok(
      pages.slice(0, -1).every((m) => m.next_cursor !== null && !/^\d{4}-/.test(m.next_cursor)),
      'a search cursor is opaque (not a date)',
    );
    t.equal(pages.at(-1)!.next_cursor, null, 'the last page says null');

    const descending = [];
    for await (const listing of client.listings.iterate({
      ...search,
      sort: 'price_desc',
      limit: 3,
    }))
      descending.push(listing.id);
    t.same(
      descending,
      [...byPrice].reverse(),
      'price_desc: dearest first, equal prices newest first',
    );

    const first = await client.listings.list({ ...search, limit: 2 });
    const other = await rejection(
      t,
      client.listings.list({ q: 'jacket', sort: 'price_asc', cursor: first.meta.next_cursor! }),
    );
    t.equal(other.status, 400, 'a cursor serves its own search only');
    t.ok(
      other.details.some((d) => d.path === '/query/cursor'),
      'details point at /query/cursor',
    );
    const unranked = await rejection(t, client.listings.list({ sort: 'relevance' }));
    t.ok(
      unranked.details.some((d) => d.path === '/query/sort'),
      'sort=relevance without q: 400 naming sort',
    );
    // @ts-expect-error sort is the document's enum
    const typo: ListListingsQuery = { sort: 'cheapest' };
    t.ok(typo, 'a sort outside the enum does not type-check');
  },
);

t.test(
  "the owner view: seller=me lists every status of the credential's own listings",
  async (t) => {
    const { seller, client } = await recordingClient('live');
    const other = await recordingClient('live');
    const draft = (
      await client.listings.create(body({ title: 'Owner draft' }), { idempotencyKey: 'own-1' })
    ).data;
    const active = (
      await client.listings.create(
        body({ title: 'Owner active', status: 'active', cover_image_url: PHOTO }),
      )
    ).data;
    const archived = (await client.listings.create(body({ title: 'Owner archived' }))).data;
    await client.listings.archive(archived.id);
    await other.client.listings.create(
      body({ title: 'Someone else', status: 'active', cover_image_url: PHOTO }),
    );
    await other.client.listings.create(body({ title: 'Someone else draft' }));

    const mine: Listing[] = [];
    for await (const listing of client.listings.iterate({ seller: 'me', limit: 2 }))
      mine.push(listing);
    t.same(
      mine.map((l) => [l.id, l.status]),
      [
        [archived.id, 'archived'],
        [active.id, 'active'],
        [draft.id, 'draft'],
      ],
      "every status, newest first, nobody else's",
    );
    t.ok(
      mine.every((l) => l.api_environment === 'live' && 'external_id' in l),
      "in the owner's view (external_id, api_environment)",
    );
    t.equal(mine.find((l) => l.id === draft.id)?.external_id, 'own-1');

    const drafts = [];
    for await (const listing of client.listings.iterate({ seller: 'me', status: 'draft' }))
      drafts.push(listing.id);
    t.same(drafts, [draft.id], 'status=draft narrows it');

    const searched = [];
    for await (const listing of client.listings.iterate({
      seller: 'me',
      q: 'archived',
      status: 'archived',
    }))
      searched.push(listing.id);
    t.same(searched, [archived.id], 'and q with it');

    const publicView = [];
    for await (const listing of anonymous.listings.iterate({ seller: seller.username }))
      publicView.push(listing.id);
    t.same(publicView, [active.id], "anyone else sees the seller's live active listing only");

    t.equal(
      (await rejection(t, anonymous.listings.list({ seller: 'me' }))).status,
      401,
      'seller=me needs a credential',
    );
    const status = await rejection(t, client.listings.list({ status: 'draft' }));
    t.equal(status.status, 400);
    t.ok(
      status.details.some((d) => d.path === '/query/status'),
      'status without seller=me: 400 naming status',
    );
  },
);

t.test('sync: seller=me, sort=updated_at from updated_since, the loop a client runs', async (t) => {
  const { client } = await recordingClient('live');
  const since = new Date(Date.now() - 1000).toISOString();
  const created: Listing[] = [];
  for (let i = 0; i < 5; i += 1) created.push((await client.listings.create(body())).data);
  await settle();

  const sync = async (from: string) => {
    const seen: Listing[] = [];
    for await (const listing of client.listings.iterate({
      seller: 'me',
      sort: 'updated_at',
      updated_since: from,
      limit: 2,
    }))
      seen.push(listing);
    return seen;
  };
  const first = await sync(since);
  t.same(
    first.map((l) => l.id),
    created.map((l) => l.id),
    'every change once, oldest first, over three pages',
  );
  const last = first.at(-1)!;

  const edited = await client.listings.update(created[1]!.id, { title: 'Edited while away' });
  const archived = await client.listings.archive(created[3]!.id);
  await settle();
  const next = await sync(last.updated_at);
  t.same(
    next.map((l) => [l.id, l.status]),
    [
      [last.id, 'draft'],
      [edited.data.id, 'draft'],
      [archived.data.id, 'archived'],
    ],
    'from the last updated_at seen: that listing again (inclusive), then the two changes',
  );
  t.equal(next[1]!.title, 'Edited while away', 'the current version');
});

t.test('batch: per-item results on 200 and on 422; a bad request throws', async (t) => {
  const mixed = await sandbox.listings.batch([body(), { title: 'no price' } as ListingCreate]);
  t.same(
    mixed.data.results.map((r) => [r.index, r.ok, r.status]),
    [
      [0, true, 201],
      [1, false, 400],
    ],
  );
  t.equal(mixed.meta.created, 1);
  t.equal(mixed.meta.failed, 1);
  const failedItem = mixed.data.results[1]!;
  if (!failedItem.ok) t.equal(failedItem.error.code, 'validation_error');

  const allFailed = await sandbox.listings.batch([{ title: 'x' } as ListingCreate]);
  t.equal(allFailed.meta.failed, 1, '422 is returned as results, not thrown');

  const empty = await rejection(t, sandbox.listings.batch([]));
  t.equal(empty.code, 'validation_error');
});

t.test('scopes: a read-only key gets 403 forbidden on writes', async (t) => {
  const reader = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(await createKey(app, developer, 'sandbox', 'read')),
  });
  const me = await reader.me();
  t.equal(me.data.username, developer.username);
  const error = await rejection(t, reader.listings.create(body()));
  t.equal(error.status, 403);
  t.equal(error.code, 'forbidden');
  const profile = await anonymous.profiles.get(developer.username);
  t.equal(profile.data.username, developer.username);
});

t.test('events: the app log, iterated', async (t) => {
  const events = [];
  for await (const event of sandbox.events.iterate({ limit: 2 })) events.push(event);
  t.ok(events.length >= 4, `${events.length} events`);
  t.ok(events.some((e) => e.type === 'listing.created'));
  const archived = events.find((e) => e.type === 'listing.archived');
  t.ok(
    archived && 'listing' in archived.data && archived.data.listing.status === 'archived',
    'payload typed as the owner view',
  );
});

t.test('OAuth: a token from the authorization code flow acts for the user in live', async (t) => {
  const client = await createClient(app);
  const user = await createEndUser(app);
  const code = await obtainCode(new Browser(app), client, user, { scope: 'read listings:write' });
  const token = (await exchange(app, client, code)).json() as { access_token: string };
  let calls = 0;
  const api: MarketplaceClient = createMarketplaceClient({
    baseUrl,
    auth: oauthTokenAuth(async () => {
      calls += 1;
      return token.access_token;
    }),
  });
  const me = await api.me();
  t.equal(me.data.username, user.username);
  t.equal(me.meta.environment, 'live');
  const created = await api.listings.create(body({ status: 'active', cover_image_url: PHOTO }));
  t.equal(created.data.api_environment, 'live');
  t.equal(calls, 2, 'the token provider is asked on every request');
  const feed = [];
  for await (const listing of anonymous.listings.iterate({ limit: 100 })) feed.push(listing.id);
  t.ok(feed.includes(created.data.id), 'the live active listing is on the public feed');

  const revoked = await api.raw.POST('/oauth/revoke', {
    body: {
      token: token.access_token,
      client_id: client.clientId,
      client_secret: client.clientSecret,
    },
    bodySerializer: (form) => new URLSearchParams(form as Record<string, string>).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(revoked.response.status, 200, 'revoked through the raw typed client');
  const after = await rejection(t, api.me());
  t.equal(after.code, 'unauthorized');
});

t.test(
  'OAuth: refreshAccessToken rotates the refresh token; a reused one is invalid_grant',
  async (t) => {
    const client = await createClient(app);
    const user = await createEndUser(app);
    const code = await obtainCode(new Browser(app), client, user, { scope: 'read listings:write' });
    const first = (await exchange(app, client, code)).json() as {
      access_token: string;
      refresh_token: string;
    };
    const credentials = { baseUrl, clientId: client.clientId, clientSecret: client.clientSecret };
    const second = await refreshAccessToken({
      ...credentials,
      refreshToken: first.refresh_token,
      scope: 'read',
    });
    t.match(second, {
      token_type: 'Bearer',
      scope: 'read',
      expires_in: 2592000,
      refresh_token: /^svc_rt_/,
    });
    const api = createMarketplaceClient({ baseUrl, auth: oauthTokenAuth(second.access_token) });
    t.equal((await api.me()).data.username, user.username, 'the refreshed access token works');
    const reused = await rejection(
      t,
      refreshAccessToken({ ...credentials, refreshToken: first.refresh_token }),
    );
    t.equal(reused.code, 'invalid_grant', 'a typed error with the OAuth error code');
    t.equal(reused.status, 400);
    t.equal((await rejection(t, api.me())).code, 'unauthorized', 'reuse revoked the authorization');
  },
);

t.test('webhooks: a real delivery verifies with the SDK helper', async (t) => {
  const receiver = await startReceiver(t);
  const endpoint = await createEndpoint(app, receiver, {
    appId: developer.appId,
    env: 'sandbox',
    path: '/sdk-hook',
  });
  const created = await sandbox.listings.create(body());
  const delivery = await waitUntil('the delivery', () =>
    receiver
      .to('/sdk-hook')
      .find(
        (r) =>
          r.event?.type === 'listing.created' &&
          (r.event.data as { listing: { id: string } }).listing.id === created.data.id,
      ),
  );
  const event = await verifyWebhook(endpoint.secret, delivery.raw, delivery.headers);
  t.equal(event.type, 'listing.created');
  t.equal(event.id, delivery.headers['webhook-id'], 'the delivery id is the idempotency key');
  await t.rejects(
    () =>
      verifyWebhook(
        endpoint.secret,
        Buffer.concat([delivery.raw, Buffer.from(' ')]),
        delivery.headers,
      ),
    WebhookVerificationError,
    'a tampered body is refused',
  );
  try {
    await verifyWebhook(
      `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      delivery.raw,
      delivery.headers,
    );
    t.fail('a wrong secret verified');
  } catch (error) {
    t.equal((error as WebhookVerificationError).reason, 'invalid_signature');
  }

  // The Standard Webhooks libraries verify the same delivery in their default mode, given the
  // secret without its `svc_` (whsec_ + base64 of the key, the one step docs/webhooks.md gives);
  // so does Svix's, which wraps them.
  t.match(endpoint.secret, /^svc_whsec_[A-Za-z0-9+/]{43}=$/, 'svc_whsec_ + base64 of 32 bytes');
  const standardForm = endpoint.secret.replace(/^svc_/, '');
  const standard = new Webhook(standardForm);
  const verified = standard.verify(delivery.raw.toString('utf8'), delivery.headers as never);
  t.match(verified, { id: event.id, type: 'listing.created' }, 'standardwebhooks verifies it');
  t.doesNotThrow(
    () =>
      new SvixWebhook(standardForm).verify(
        delivery.raw.toString('utf8'),
        delivery.headers as never,
      ),
    'svix verifies it',
  );
  t.throws(
    () => standard.verify(`${delivery.raw.toString('utf8')} `, delivery.headers as never),
    'and it refuses a tampered body',
  );
});
