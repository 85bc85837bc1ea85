/**
 * The SDK's webhookEndpoints methods against the running server over real HTTP: create (the
 * secret once), list, pages and iterate, get, update (events, disable), delete; typed errors;
 * and an endpoint made with the SDK receiving a real delivery of the one type it subscribed to,
 * verified with the secret the SDK returned.
 */
import t from 'tap';
import { apiKeyAuth, createMarketplaceClient, type WebhookEndpoint } from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { waitUntil } from '../helpers/wait.ts';
import { startReceiver } from '../webhooks/support.ts';
import { rejection } from './support.ts';

const { app, baseUrl } = await listeningApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const receiver = await startReceiver(t);
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox', 'read listings:write webhooks:write');
const api = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });

t.test('create, list, iterate, get, update, delete', async (t) => {
  const created = await api.webhookEndpoints.create({
    url: 'https://93.184.215.14/sdk',
    enabled_events: ['listing.created'],
  });
  t.match(created.data, {
    url: 'https://93.184.215.14/sdk',
    environment: 'sandbox',
    enabled_events: ['listing.created'],
    disabled: false,
    secret: /^svc_whsec_[A-Za-z0-9+/]{43}=$/,
  });
  const id = created.data.id;
  const more = await api.webhookEndpoints.create({ url: 'https://93.184.215.14/sdk-2' });
  t.same(more.data.enabled_events, ['*'], 'every type by default');

  const page = await api.webhookEndpoints.list({ limit: 1 });
  t.equal(page.data.length, 1);
  t.type(page.meta.next_cursor, 'string');
  const all: WebhookEndpoint[] = [];
  for await (const endpoint of api.webhookEndpoints.iterate({ limit: 1 })) all.push(endpoint);
  t.same(
    all.map((e) => e.id),
    [more.data.id, id],
    'iterate follows the cursor, newest first',
  );
  let pages = 0;
  for await (const p of api.webhookEndpoints.pages({ limit: 1 })) pages += p.data.length ? 1 : 0;
  t.equal(pages, 2);

  const got = await api.webhookEndpoints.get(id);
  t.equal(got.data.url, 'https://93.184.215.14/sdk');
  t.notOk('secret' in got.data);

  const updated = await api.webhookEndpoints.update(id, {
    enabled_events: ['listing.archived'],
    disabled: true,
  });
  t.match(updated.data, { enabled_events: ['listing.archived'], disabled: true });

  t.equal(await api.webhookEndpoints.delete(id), undefined, 'delete resolves with nothing');
  const gone = await rejection(t, api.webhookEndpoints.get(id));
  t.match(gone, { status: 404, code: 'not_found' });
  await api.webhookEndpoints.delete(more.data.id);
});

t.test('typed errors: validation names the field; a key without the scope is 403', async (t) => {
  const invalid = await rejection(
    t,
    api.webhookEndpoints.create({ url: 'http://93.184.215.14/plain' }),
  );
  t.match(invalid, { status: 400, code: 'validation_error', details: [{ path: '/url' }] });
  const plain = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(await createKey(app, developer, 'sandbox')),
  });
  const forbidden = await rejection(t, plain.webhookEndpoints.list());
  t.match(forbidden, { status: 403, code: 'forbidden', message: /webhooks:write/ });
});

t.test('an endpoint made with the SDK receives the type it subscribed to', async (t) => {
  const created = await api.webhookEndpoints.create({
    url: receiver.url('/sdk-archived'),
    enabled_events: ['listing.archived'],
  });
  receiver.secrets.set('/sdk-archived', created.data.secret);
  const listing = await api.listings.create({
    title: 'SDK webhook listing',
    price_cents: 1200,
    status: 'active',
    cover_image_url: 'https://images.example.com/listings/sdk.jpg',
  });
  await api.listings.archive(listing.data.id);
  const [received] = await waitUntil('the archive delivery', () =>
    receiver.to('/sdk-archived').length > 0 ? receiver.to('/sdk-archived') : null,
  );
  t.equal(received!.verifyError, null, 'verified with the secret the SDK returned');
  t.equal(received!.event?.type, 'listing.archived');
  t.same(
    receiver.to('/sdk-archived').map((r) => r.event?.type),
    ['listing.archived'],
    'no listing.created',
  );
});
