/**
 * SSRF protection and endpoint rules (CONTRACT §6), with WEBHOOK_ALLOW_PRIVATE_NETWORKS unset:
 * internal destinations are refused at creation and again at delivery, and the connection goes
 * to the address that was checked (no DNS rebinding). Live endpoints need an approved app.
 */
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { webhookEndpoints } from '../../src/db/schema.ts';
import { sendWebhook } from '../../src/webhooks/sender.ts';
import { checkDestination, isInternalAddress, parseWebhookUrl, UnsafeDestinationError } from '../../src/webhooks/ssrf.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { startReceiver, waitFor } from './support.ts';

const app = await buildTestApp(t, { WEBHOOK_RETRY_SCHEDULE: '3600' });
const receiver = await startReceiver(t);
const dev = await createDeveloper(app);

const VALIDATION = { code: 'validation_error', statusCode: 400, details: [{ path: '/url' }] };

t.test('internal or malformed destinations are refused at creation', async (t) => {
  t.equal(app.config.webhookAllowPrivateNetworks, false, 'private networks are refused in this file');
  const refused: [string, RegExp][] = [
    ['http://example.com/hook', /https/],
    ['ftp://example.com/hook', /https/],
    ['not a url', /absolute https URL/],
    ['https://user:secret@example.com/hook', /credentials/],
    ['https://example.com/hook#part', /fragment/],
    [`https://localhost:${receiver.port}/hook`, /localhost resolves to 127\.0\.0\.1/],
    ['https://127.0.0.1/hook', /127\.0\.0\.1/],
    ['https://127.1.2.3/hook', /internal/],
    ['https://0.0.0.0/hook', /internal/],
    ['https://10.1.2.3/hook', /internal/],
    ['https://172.16.0.1/hook', /internal/],
    ['https://192.168.1.1/hook', /internal/],
    ['https://100.64.0.1/hook', /internal/],
    ['https://169.254.169.254/latest/meta-data', /link-local/],
    ['https://224.0.0.1/hook', /internal/],
    ['https://255.255.255.255/hook', /internal/],
    ['https://[::1]/hook', /::1/],
    ['https://[::ffff:127.0.0.1]/hook', /internal/],
    ['https://[fe80::1]/hook', /internal/],
    ['https://[fd00::1]/hook', /internal/],
    ['https://[ff02::1]/hook', /internal/],
    ['https://no-such-host.invalid/hook', /does not resolve/],
  ];
  for (const [url, message] of refused) {
    await t.rejects(app.services.webhooks.create({ appId: dev.appId, env: 'sandbox', url }), { ...VALIDATION, message }, url);
  }
  const count = await app.db.$count(webhookEndpoints);
  t.equal(count, 0, 'nothing was stored');
});

t.test('a public address is accepted; the secret is shown once', async (t) => {
  const created = await app.services.webhooks.create({ appId: dev.appId, env: 'sandbox', url: 'https://93.184.215.14/hook' });
  t.match(created, { id: /^[0-9a-f-]{36}$/, url: 'https://93.184.215.14/hook', env: 'sandbox', secret: /^svc_whsec_[A-Za-z0-9_-]{43}$/ });
  const shown = await app.services.webhooks.show(created.id);
  t.strictSame(Object.keys(shown).sort(), ['active', 'env', 'id', 'last_error', 'last_failure_at', 'url']);
  t.notOk(JSON.stringify(shown).includes(created.secret), 'show never returns the secret');
});

t.test('live endpoints need a production-approved app', async (t) => {
  const other = await createDeveloper(app);
  const input = { appId: other.appId, env: 'live', url: 'https://93.184.215.14/live' };
  await t.rejects(app.services.webhooks.create(input), { code: 'forbidden', statusCode: 403, message: /production-approved/ });
  await t.rejects(app.services.webhooks.create({ ...input, env: 'staging' }), { code: 'validation_error', details: [{ path: '/env' }] });
  await app.services.apps.approve(other.appId);
  t.match(await app.services.webhooks.create(input), { env: 'live' });
});

t.test('a host that resolves to an internal address is refused again at delivery', async (t) => {
  // Stored directly, as if DNS had answered a public address at creation and changed since.
  const [endpoint] = await app.db
    .insert(webhookEndpoints)
    .values({ appId: dev.appId, environment: 'sandbox', url: receiver.url('/rebound', 'localhost'), secret: 'svc_whsec_test' })
    .returning();
  const { delivery_id } = await app.services.webhooks.ping(endpoint!.id);
  const delivery = await waitFor('the refused attempt', async () =>
    (await app.services.webhooks.recentDeliveries(endpoint!.id)).deliveries.find((d) => d.id === delivery_id && d.attempts === 1 && d.last_error),
  );
  t.match(delivery, { status: 'pending', attempts: 1, last_response_code: null, last_error: /^refused: host localhost resolves to 127\.0\.0\.1/ });
  t.match(await app.services.webhooks.show(endpoint!.id), { last_error: /^refused: /, last_failure_at: /Z$/ });
  t.equal(receiver.received.length, 0, 'nothing reached the receiver');
});

t.test('address checks', async (t) => {
  for (const ip of ['127.0.0.1', '10.0.0.1', '169.254.1.1', '192.168.0.1', '172.31.255.255', '::1', '::', 'fe80::1', 'fc00::1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', '2001:db8::1', 'not-an-ip']) {
    t.ok(isInternalAddress(ip), `${ip} is internal`);
  }
  for (const ip of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8']) {
    t.notOk(isInternalAddress(ip), `${ip} is public`);
  }
  // one internal answer among several is enough to refuse
  const resolver = async () => [
    { address: '93.184.215.14', family: 4 },
    { address: '10.0.0.7', family: 4 },
  ];
  await t.rejects(checkDestination(parseWebhookUrl('https://mixed.example/hook'), { allowPrivateNetworks: false, resolver }), UnsafeDestinationError);
  t.match(await checkDestination(parseWebhookUrl('https://mixed.example/hook'), { allowPrivateNetworks: true, resolver }), { address: '93.184.215.14' });
});

t.test('the request connects to the checked address, whatever DNS answers next', async (t) => {
  // A second receiver on 127.0.0.2, same port: system DNS would send "localhost" to 127.0.0.1.
  const tls = (name: string) => readFileSync(fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url)));
  const hits: string[] = [];
  const other = createServer({ key: tls('receiver-key.pem'), cert: tls('receiver-cert.pem') }, (req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => other.listen(receiver.port, '127.0.0.2', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));
  t.equal((other.address() as AddressInfo).address, '127.0.0.2');

  let lookups = 0;
  const rebinding = async () => {
    lookups += 1;
    // First answer 127.0.0.2 (the one checked); any later answer would point elsewhere.
    return [{ address: lookups === 1 ? '127.0.0.2' : '127.0.0.1', family: 4 }];
  };
  const result = await sendWebhook(receiver.url('/pinned', 'localhost'), '{}', { 'content-type': 'application/json' }, {
    allowPrivateNetworks: true,
    timeoutMs: 5000,
    resolver: rebinding,
  });
  t.match(result, { kind: 'success', responseCode: 204 });
  t.equal(lookups, 1, 'resolved once, by the check');
  t.strictSame(hits, ['/pinned'], 'the checked address got the request (TLS verified for localhost)');
  t.equal(receiver.to('/pinned').length, 0, 'and 127.0.0.1 did not');

  const refused = await sendWebhook(receiver.url('/pinned', 'localhost'), '{}', {}, { allowPrivateNetworks: false, timeoutMs: 5000, resolver: rebinding });
  t.match(refused, { kind: 'failure', responseCode: null, error: /^refused: host localhost resolves to 127\.0\.0\.1/ });
});
