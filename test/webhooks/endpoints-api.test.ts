/**
 * /api/v1/webhook_endpoints (OpenAPI "Webhook endpoints"): an integration manages its app's
 * endpoints with one of the app's API keys (scope webhooks:write), in the key's environment,
 * under the portal's and the CLI's rules (one service); and enabled_events decides which events
 * an endpoint receives, checked against a real HTTPS receiver and the deliveries' rows.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { api, startReceiver, webhooksApp, type Json } from './support.ts';

const app = await webhooksApp(t);
const receiver = await startReceiver(t);
const BASE = '/api/v1/webhook_endpoints';
const ALL_SCOPES = 'read listings:write webhooks:write';

const dev = await createDeveloper(app);
const key = await createKey(app, dev, 'sandbox', ALL_SCOPES);
const other = await createDeveloper(app);
const otherKey = await createKey(app, other, 'sandbox', ALL_SCOPES);

t.test('create, get, list, patch, delete through HTTP; the secret is shown once', async (t) => {
  const url = receiver.url('/crud');
  const created = await api(app, 'POST', BASE, key, { url });
  t.equal(created.status, 201);
  t.match(created.body.data, {
    id: String,
    url,
    environment: 'sandbox',
    enabled_events: ['*'],
    disabled: false,
    disabled_reason: null,
    secret: /^svc_whsec_[A-Za-z0-9+/]{43}=$/,
  });
  t.equal(created.body.meta.environment, 'sandbox');
  const id = created.body.data.id as string;

  const got = await api(app, 'GET', `${BASE}/${id}`, key);
  t.equal(got.status, 200);
  t.equal(got.body.data.url, url);
  t.notOk('secret' in got.body.data, 'a read never shows the secret');
  t.notMatch(JSON.stringify(got.body), created.body.data.secret);

  const listed = await api(app, 'GET', BASE, key);
  t.equal(listed.status, 200);
  t.ok(
    listed.body.data.some((e: Json) => e.id === id && !('secret' in e)),
    'listed, without its secret',
  );
  t.match(listed.body.meta, { next_cursor: null, count: listed.body.data.length });

  const patched = await api(app, 'PATCH', `${BASE}/${id}`, key, {
    url: receiver.url('/crud-2'),
    enabled_events: ['listing.archived', 'listing.created', 'listing.created'],
  });
  t.equal(patched.status, 200);
  t.same(
    patched.body.data.enabled_events,
    ['listing.created', 'listing.archived'],
    'duplicates folded, in the document order',
  );
  t.equal(patched.body.data.url, receiver.url('/crud-2'));
  t.notOk('secret' in patched.body.data);

  const disabled = await api(app, 'PATCH', `${BASE}/${id}`, key, { disabled: true });
  t.equal(disabled.status, 200);
  t.match(disabled.body.data, { disabled: true, disabled_reason: /developer/ });
  const again = await api(app, 'PATCH', `${BASE}/${id}`, key, { disabled: true });
  t.equal(again.status, 200, 'sending the state it has changes nothing');

  // Re-enabling pings the endpoint first (the portal's rule): a 503 answer keeps it disabled.
  receiver.secrets.set('/crud-2', created.body.data.secret);
  receiver.reply = ({ path }) => ({ status: path === '/crud-2' ? 503 : 200 });
  const refused = await api(app, 'PATCH', `${BASE}/${id}`, key, { disabled: false });
  t.equal(refused.status, 409);
  t.match(refused.body.error, { code: 'conflict', message: /check ping was answered 503/ });
  receiver.reply = () => ({ status: 200 });
  const enabled = await api(app, 'PATCH', `${BASE}/${id}`, key, { disabled: false });
  t.equal(enabled.status, 200);
  t.match(enabled.body.data, { disabled: false, disabled_reason: null });
  t.ok(
    receiver.to('/crud-2').some((r) => r.event?.type === 'ping' && r.verifyError === null),
    'the check ping was signed with the secret shown at creation (SDK, standardwebhooks, svix)',
  );

  const deleted = await app.inject({
    method: 'DELETE',
    url: `${BASE}/${id}`,
    headers: { authorization: `Bearer ${key}` },
  });
  t.equal(deleted.statusCode, 204);
  t.equal(deleted.body, '', 'no body');
  t.equal((await api(app, 'GET', `${BASE}/${id}`, key)).status, 404, 'gone for the API');
  t.equal((await api(app, 'DELETE', `${BASE}/${id}`, key)).status, 404, 'a second delete: 404');
  t.equal((await api(app, 'PATCH', `${BASE}/${id}`, key, { disabled: false })).status, 404);
  t.notOk(
    (await api(app, 'GET', BASE, key)).body.data.some((e: Json) => e.id === id),
    'not listed',
  );
  await t.rejects(
    app.services.endpoints.show(id),
    { message: /No webhook endpoint/ },
    'gone for the CLI',
  );
  const [row] = await queryRows<{ active: boolean; secret: string; deleted: boolean }>(
    app.db,
    sql`select active, secret, deleted_at is not null as deleted from webhook_endpoints where id = ${id}`,
  );
  t.same({ ...row }, { active: false, secret: '', deleted: true }, 'kept, inactive, secret erased');
});

t.test('delete fails its pending deliveries; nothing more is sent to it', async (t) => {
  // A receiver that fails, so the delivery stays pending with a retry scheduled far ahead.
  receiver.reply = ({ path }) => ({ status: path === '/doomed' ? 500 : 200 });
  const created = await api(app, 'POST', BASE, key, { url: receiver.url('/doomed') });
  receiver.secrets.set('/doomed', created.body.data.secret);
  const id = created.body.data.id as string;
  const listing = await api(app, 'POST', '/api/v1/listings', key, listingBody());
  t.equal(listing.status, 201);
  const pending = () =>
    queryRows<{ status: string; attempts: number; last_error: string | null }>(
      app.db,
      sql`select status, attempts, last_error from webhook_deliveries where endpoint_id = ${id}`,
    );
  await waitUntil('a failed attempt', async () => (await pending())[0]?.attempts === 1);
  t.match(await pending(), [{ status: 'pending' }], 'a retry is due');
  t.equal((await api(app, 'DELETE', `${BASE}/${id}`, key)).status, 204);
  t.match(await pending(), [{ status: 'failed', last_error: 'endpoint deleted' }]);
  receiver.reply = () => ({ status: 200 });
});

t.test('validation errors name the field; no 500 for client input', async (t) => {
  const cases: [string, 'POST' | 'PATCH', unknown, string][] = [
    ['http URL', 'POST', { url: 'http://example.com/hook' }, '/url'],
    ['not a URL', 'POST', { url: 'nope' }, '/url'],
    ['no url', 'POST', {}, '/url'],
    [
      'unknown event',
      'POST',
      { url: receiver.url('/v'), enabled_events: ['listing.deleted'] },
      '/enabled_events/0',
    ],
    [
      'ping is not a subscription',
      'POST',
      { url: receiver.url('/v'), enabled_events: ['ping'] },
      '/enabled_events/0',
    ],
    ['empty events', 'POST', { url: receiver.url('/v'), enabled_events: [] }, '/enabled_events'],
    [
      '* with others',
      'POST',
      { url: receiver.url('/v'), enabled_events: ['*', 'listing.created'] },
      '/enabled_events/1',
    ],
    [
      'events not an array',
      'POST',
      { url: receiver.url('/v'), enabled_events: 'listing.created' },
      '/enabled_events',
    ],
    ['unknown field', 'POST', { url: receiver.url('/v'), secret: 'mine' }, '/secret'],
    ['empty patch', 'PATCH', {}, ''],
    ['disabled not boolean', 'PATCH', { disabled: 'yes' }, '/disabled'],
  ];
  const existing = await api(app, 'POST', BASE, key, { url: receiver.url('/v') });
  t.equal(existing.status, 201);
  for (const [what, method, body, path] of cases) {
    const res = await api(
      app,
      method,
      method === 'POST' ? BASE : `${BASE}/${existing.body.data.id}`,
      key,
      body,
    );
    t.equal(res.status, 400, `${what}: 400`);
    t.equal(res.body.error.code, 'validation_error', what);
    t.ok(
      res.body.error.details.some((d: Json) => d.path === path),
      `${what}: details name ${path || 'the body'} (${JSON.stringify(res.body.error.details)})`,
    );
  }
  // Forged cursors with a well-formed date PostgreSQL refuses (no year zero; no 30 February).
  const forged = (day: string) =>
    Buffer.from(`${day}T00:00:00.000000Z|0190a3c2-7d4e-7000-8000-000000000000`).toString(
      'base64url',
    );
  for (const [what, url, path] of [
    ['bad id', `${BASE}/not-a-uuid`, '/path/id'],
    ['bad cursor', `${BASE}?cursor=bm90IGEgY3Vyc29y`, '/query/cursor'],
    ['cursor dated 0000-01-01', `${BASE}?cursor=${forged('0000-01-01')}`, '/query/cursor'],
    ['cursor dated 2021-02-30', `${BASE}?cursor=${forged('2021-02-30')}`, '/query/cursor'],
    ['bad limit', `${BASE}?limit=0`, '/query/limit'],
  ] as const) {
    const res = await api(app, 'GET', url, key);
    t.equal(res.status, 400, `${what}: 400`);
    t.match(res.body.error, { code: 'validation_error', details: [{ path }] }, what);
  }
  const malformed = await app.inject({
    method: 'POST',
    url: BASE,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    payload: '{"url":',
  });
  t.equal(malformed.statusCode, 400, 'malformed JSON: 400');
});

t.test('a URL is stored as WHATWG serializes it; port 0 is refused', async (t) => {
  const url = receiver.url('/normalized');
  const raw = url.replace('https://', 'HTTPS:');
  const created = await api(app, 'POST', BASE, key, { url: raw });
  t.equal(created.status, 201);
  t.equal(created.body.data.url, url, 'https:host is https://host');
  const id = created.body.data.id as string;
  t.equal((await api(app, 'GET', `${BASE}/${id}`, key)).body.data.url, url, 'as stored');
  const patched = await api(app, 'PATCH', `${BASE}/${id}`, key, {
    url: receiver.url('/normalized-2').replace('https://', 'https:'),
  });
  t.equal(patched.status, 200);
  t.equal(patched.body.data.url, receiver.url('/normalized-2'), 'a change too');
  for (const zero of ['https://hooks.example:0/', 'https://hooks.example:00/x']) {
    const res = await api(app, 'POST', BASE, key, { url: zero });
    t.equal(res.status, 400, `${zero}: 400`);
    t.match(res.body.error, { code: 'validation_error', details: [{ path: '/url' }] }, zero);
    t.match(res.body.error.message, /port 0/, zero);
  }
  t.equal((await api(app, 'DELETE', `${BASE}/${id}`, key)).status, 204);
});

t.test('SSRF: internal destinations are refused with the same words', async (t) => {
  const strict = await webhooksApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' });
  const d = await createDeveloper(strict);
  const k = await createKey(strict, d, 'sandbox', ALL_SCOPES);
  for (const url of [
    'https://127.0.0.1/hook',
    'https://10.0.0.8/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://[::ffff:192.168.1.1]/hook',
    'https://localhost/hook',
  ]) {
    const res = await api(strict, 'POST', BASE, k, { url });
    t.equal(res.status, 400, url);
    t.match(res.body.error, {
      code: 'validation_error',
      details: [{ path: '/url', message: /public internet/ }],
    });
  }
  const ok = await api(strict, 'POST', BASE, k, { url: 'https://93.184.215.14/hook' });
  t.equal(ok.status, 201, 'a public address is accepted');
  const moved = await api(strict, 'PATCH', `${BASE}/${ok.body.data.id}`, k, {
    url: 'https://192.168.0.1/hook',
  });
  t.equal(moved.status, 400, 'a change of URL is checked too');
  t.match(moved.body.error.details, [{ path: '/url' }]);
});

t.test('at most 16 active endpoints per app and environment', async (t) => {
  const d = await createDeveloper(app);
  const k = await createKey(app, d, 'sandbox', ALL_SCOPES);
  const ids: string[] = [];
  for (let i = 0; i < 16; i += 1) {
    const res = await api(app, 'POST', BASE, k, { url: `https://93.184.215.14/cap-${i}` });
    t.equal(res.status, 201);
    ids.push(res.body.data.id);
  }
  const over = await api(app, 'POST', BASE, k, { url: 'https://93.184.215.14/cap-16' });
  t.equal(over.status, 409);
  t.match(over.body.error, { code: 'conflict', message: /already has 16 active sandbox/ });
  // Keyset pages of 5: every endpoint once, newest first.
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: Json } = await api(
      app,
      'GET',
      `${BASE}?limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      k,
    );
    t.equal(page.status, 200);
    seen.push(...page.body.data.map((e: Json) => e.id));
    cursor = page.body.meta.next_cursor;
  } while (cursor !== null);
  t.same(seen, [...ids].reverse(), 'four pages, each endpoint once, newest first');
  t.equal((await api(app, 'DELETE', `${BASE}/${ids[0]}`, k)).status, 204);
  t.equal(
    (await api(app, 'POST', BASE, k, { url: 'https://93.184.215.14/cap-17' })).status,
    201,
    'a deleted endpoint makes room',
  );
});

t.test('live endpoints: a live key, and only for a production-approved app', async (t) => {
  const d = await createDeveloper(app);
  const live = await createKey(app, d, 'live', ALL_SCOPES);
  const sandbox = await createKey(app, d, 'sandbox', ALL_SCOPES);
  const refused = await api(app, 'POST', BASE, live, { url: 'https://93.184.215.14/live' });
  t.equal(refused.status, 403);
  t.match(refused.body.error, {
    code: 'forbidden',
    message: /Live webhook endpoints need a production-approved app/,
  });
  t.equal(refused.body.meta.environment, 'live');
  await app.services.apps.approve(d.appId);
  const made = await api(app, 'POST', BASE, live, { url: 'https://93.184.215.14/live' });
  t.equal(made.status, 201);
  t.equal(made.body.data.environment, 'live', "the key's environment");
  const id = made.body.data.id;
  t.equal((await api(app, 'GET', `${BASE}/${id}`, sandbox)).status, 404, 'not from sandbox');
  t.notOk((await api(app, 'GET', BASE, sandbox)).body.data.some((e: Json) => e.id === id));
  t.equal((await api(app, 'GET', `${BASE}/${id}`, live)).status, 200);
});

t.test("another app's endpoint is 404, for every operation", async (t) => {
  const mine = await api(app, 'POST', BASE, key, { url: 'https://93.184.215.14/mine' });
  const id = mine.body.data.id;
  for (const [method, body] of [
    ['GET', undefined],
    ['PATCH', { enabled_events: ['listing.created'] }],
    ['DELETE', undefined],
  ] as const) {
    const res = await api(app, method, `${BASE}/${id}`, otherKey, body);
    t.equal(res.status, 404, method);
    t.equal(res.body.error.code, 'not_found');
  }
  t.notOk((await api(app, 'GET', BASE, otherKey)).body.data.some((e: Json) => e.id === id));
  t.match(
    await app.services.endpoints.details(id),
    { enabled_events: ['*'], active: true },
    'unchanged',
  );
});

t.test('who may call: API keys with webhooks:write only', async (t) => {
  const res = await api(app, 'GET', BASE, null);
  t.equal(res.status, 401, 'anonymous: 401');
  const plain = await createKey(app, dev, 'sandbox'); // the default scopes
  const noScope = await api(app, 'POST', BASE, plain, { url: 'https://93.184.215.14/x' });
  t.equal(noScope.status, 403);
  t.match(noScope.body.error, { code: 'forbidden', message: /webhooks:write/ });

  const client = await createClient(app);
  const user = await createEndUser(app);
  const code = await obtainCode(new Browser(app), client, user, { scope: 'read listings:write' });
  const token = JSON.parse((await exchange(app, client, code)).body).access_token as string;
  for (const [method, url, body] of [
    ['GET', BASE, undefined],
    ['POST', BASE, { url: 'https://93.184.215.14/x' }],
  ] as const) {
    const res = await api(app, method, url, token, body);
    t.equal(res.status, 403, `${method}: an OAuth token gets 403`);
    t.match(res.body.error, { code: 'forbidden', message: /use one of the app's API keys/ });
  }
});

t.test(
  'enabled_events: an endpoint subscribed to listing.archived hears only archives',
  async (t) => {
    const d = await createDeveloper(app);
    const k = await createKey(app, d, 'sandbox', ALL_SCOPES);
    const archives = await api(app, 'POST', BASE, k, {
      url: receiver.url('/archives'),
      enabled_events: ['listing.archived'],
    });
    const everything = await api(app, 'POST', BASE, k, { url: receiver.url('/everything') });
    receiver.secrets.set('/archives', archives.body.data.secret);
    receiver.secrets.set('/everything', everything.body.data.secret);

    const listing = await api(app, 'POST', '/api/v1/listings', k, listingBody());
    t.equal(listing.status, 201);
    const batch = await api(app, 'POST', '/api/v1/listings/batch', k, {
      items: [listingBody({ external_id: 'b-1' }), listingBody({ external_id: 'b-2' })],
    });
    t.equal(batch.status, 200);
    const archived = await api(app, 'DELETE', `/api/v1/listings/${listing.body.data.id}`, k);
    t.equal(archived.status, 200);

    const deliveries = (endpointId: string) =>
      queryRows<{ type: string }>(
        app.db,
        sql`select e.type from webhook_deliveries d join webhook_events e on e.id = d.event_id
          where d.endpoint_id = ${endpointId} order by e.created_at`,
      );
    t.same(
      (await deliveries(archives.body.data.id)).map((r) => r.type),
      ['listing.archived'],
      'one delivery: the archive (no create, single or batch)',
    );
    t.same(
      (await deliveries(everything.body.data.id)).map((r) => r.type),
      ['listing.created', 'listing.created', 'listing.created', 'listing.archived'],
      '"*" hears everything',
    );
    await waitUntil(
      'the deliveries',
      () => receiver.to('/everything').length >= 4 && receiver.to('/archives').length >= 1,
    );
    t.same(
      receiver.to('/archives').map((r) => [r.event?.type, r.verifyError]),
      [['listing.archived', null]],
      'the receiver got the archive, signed',
    );

    // Pings always reach their endpoint, whatever it subscribes to.
    await app.services.endpoints.ping(archives.body.data.id);
    await waitUntil('the ping', () =>
      receiver.to('/archives').some((r) => r.event?.type === 'ping'),
    );

    // The app's event log lists every event, subscribed or not.
    const events = await api(app, 'GET', '/api/v1/events?limit=100', k);
    t.same(events.body.data.map((e: Json) => e.type).sort(), [
      'listing.archived',
      'listing.created',
      'listing.created',
      'listing.created',
      'ping',
    ]);

    // Changing the subscription counts from the next event on.
    const patched = await api(app, 'PATCH', `${BASE}/${archives.body.data.id}`, k, {
      enabled_events: ['listing.updated'],
    });
    t.equal(patched.status, 200);
    const second = await api(app, 'POST', '/api/v1/listings', k, listingBody({ status: 'draft' }));
    await api(app, 'PATCH', `/api/v1/listings/${second.body.data.id}`, k, {
      title: 'A new title here',
    });
    t.same(
      (await deliveries(archives.body.data.id)).map((r) => r.type),
      ['listing.archived', 'ping', 'listing.updated'],
    );
  },
);
