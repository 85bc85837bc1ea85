/**
 * The webhooks pages against a REAL HTTPS receiver (test/webhooks/support.ts): endpoints made
 * through the page (secret shown once), ping, the active flag, last error and failure time,
 * recent deliveries and redeliver; EndpointsService's refusals in its own words; another app's
 * endpoint or delivery is not found.
 */
import t from 'tap';
import { waitUntil } from '../helpers/wait.ts';
import { startReceiver } from '../webhooks/support.ts';
import { alertOf, appWithLog, createApp, noticeOf, shownSecret, signUp } from './support.ts';

const { app, log } = await appWithLog(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const receiver = await startReceiver(t);
receiver.reply = ({ path }) => ({ status: path === '/down' ? 500 : path === '/gone' ? 410 : 200 });

const owner = await signUp(app);
const appId = await createApp(owner, 'Hooks app');
const hooksUrl = `/portal/apps/${appId}/webhooks`;
const secrets: string[] = [];

async function createEndpoint(path: string): Promise<{ id: string; secret: string }> {
  const res = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: receiver.url(path),
  });
  const secret = shownSecret(res.body, 'webhook-secret');
  if (res.statusCode !== 201 || !secret)
    throw new Error(`endpoint not created: ${res.statusCode} ${alertOf(res.body)}`);
  receiver.secrets.set(path, secret);
  secrets.push(secret);
  const endpoint = (await app.services.endpoints.list(appId)).find(
    (e) => e.url === receiver.url(path),
  )!;
  return { id: endpoint.id, secret };
}

const refusal = (work: () => Promise<unknown>) =>
  work().then(
    () => 'accepted',
    (err: Error) => err.message,
  );

t.test("creating an endpoint: refusals in the service's words, then the secret once", async (t) => {
  const page = await owner.browser.get(hooksUrl);
  t.match(page.body, /No endpoints yet/);
  t.match(page.body, /<label for="endpoint-url">URL<\/label>/);

  const http = await owner.browser.submit(
    { env: 'sandbox', url: 'http://example.com/hook' },
    hooksUrl,
  );
  t.equal(http.statusCode, 400);
  t.equal(
    alertOf(http.body),
    await refusal(() =>
      app.services.endpoints.create({ appId, env: 'sandbox', url: 'http://example.com/hook' }),
    ),
  );
  t.match(http.body, /value="http:\/\/example.com\/hook"/, 'the form keeps the URL');

  const live = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'live',
    url: receiver.url('/live'),
  });
  t.equal(live.statusCode, 403);
  t.equal(
    alertOf(live.body),
    'Live webhook endpoints need a production-approved app; use a sandbox endpoint until the app is approved.',
  );

  const res = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: receiver.url('/hook'),
  });
  t.equal(res.statusCode, 201);
  const secret = shownSecret(res.body, 'webhook-secret')!;
  secrets.push(secret);
  receiver.secrets.set('/hook', secret);
  t.match(secret, /^svc_whsec_[A-Za-z0-9+/]{43}=$/);
  t.match(
    res.body,
    /Standard Webhooks libraries without its svc_, new Webhook\(secret\.replace\(\/\^svc_\/, /,
    'the one step for the Standard Webhooks libraries, as docs/webhooks.md gives it',
  );
  t.match(res.body, /you will not see this again/);
  t.match(res.body, /<span class="status-ok">Active<\/span>/);

  const again = await owner.browser.get(hooksUrl);
  t.notOk(again.body.includes(secret), 'the secret is not shown again');
  t.match(
    again.body,
    new RegExp(
      `<a href="${hooksUrl}/[0-9a-f-]{36}">${receiver.url('/hook').replaceAll('.', '\\.')}</a>`,
    ),
  );
});

t.test('ping, recent deliveries and redeliver with the same delivery id', async (t) => {
  const endpoint = (await app.services.endpoints.list(appId)).find(
    (e) => e.url === receiver.url('/hook'),
  )!;
  const endpointUrl = `${hooksUrl}/${endpoint.id}`;
  const pinged = await owner.browser.act(hooksUrl, `${endpointUrl}/ping`);
  t.equal(pinged.statusCode, 303);
  t.equal(pinged.headers.location, `${endpointUrl}?done=pinged`);
  const [first] = await waitUntil('the ping', () =>
    receiver.to('/hook').length >= 1 ? receiver.to('/hook') : null,
  );
  t.equal(first!.event?.type, 'ping', 'delivered and verified with the secret the page showed');
  const deliveryId = first!.headers['x-service-delivery'] as string;
  await waitUntil(
    'the delivery to succeed',
    async () =>
      (await app.services.endpoints.recentDeliveries(endpoint.id)).deliveries[0]?.status ===
      'succeeded',
  );

  const page = await owner.browser.get(`${endpointUrl}?done=pinged`);
  t.match(noticeOf(page.body), /Ping sent/);
  t.match(
    page.body,
    new RegExp(
      `<td><code>${deliveryId}</code></td>\\n<td>ping</td>\\n<td><span class="delivery-succeeded">succeeded</span></td>\\n<td>1</td>\\n<td>200</td>`,
    ),
  );
  t.match(page.body, /<dt>Last error<\/dt><dd><span class="muted">none<\/span><\/dd>/);

  const redelivered = await owner.browser.submit(
    { delivery_id: deliveryId },
    `${endpointUrl}/redeliver`,
  );
  t.equal(redelivered.statusCode, 303);
  t.equal(redelivered.headers.location, `${endpointUrl}?done=redelivered`);
  const second = await waitUntil('the redelivery', () => receiver.to('/hook')[1]);
  t.equal(
    second.headers['x-service-delivery'],
    deliveryId,
    'the same delivery id: the receiver can deduplicate',
  );
});

t.test(
  'a failing endpoint shows its last error and failure time; a pending delivery cannot be redelivered',
  async (t) => {
    const down = await createEndpoint('/down');
    await owner.browser.act(hooksUrl, `${hooksUrl}/${down.id}/ping`);
    await waitUntil(
      'the failure to be recorded',
      async () => (await app.services.endpoints.show(down.id)).last_failure_at,
    );
    const list = await owner.browser.get(hooksUrl);
    t.match(list.body, /HTTP 500|500/, 'the last error is on the list');
    const page = await owner.browser.get(`${hooksUrl}/${down.id}`);
    const shown = await app.services.endpoints.show(down.id);
    t.match(page.body, `<dt>Last error</dt><dd>${shown.last_error}</dd>`);
    t.match(page.body, /<dt>Last failure<\/dt><dd><time datetime="/);
    t.match(
      page.body,
      /<span class="delivery-pending">pending<\/span><br><span class="muted">next <time/,
    );
    const deliveryId = (await app.services.endpoints.recentDeliveries(down.id)).deliveries[0]!.id;
    t.notMatch(
      page.body,
      new RegExp(`name="delivery_id" value="${deliveryId}"`),
      'no redeliver button on a pending delivery',
    );
    const refused = await owner.browser.submit(
      { delivery_id: deliveryId },
      `${hooksUrl}/${down.id}/redeliver`,
    );
    t.equal(refused.statusCode, 409);
    t.match(alertOf(refused.body), new RegExp(`^Delivery ${deliveryId} is still pending`));
  },
);

t.test('an endpoint that answered 410 is shown disabled, without a ping button', async (t) => {
  const gone = await createEndpoint('/gone');
  await owner.browser.act(hooksUrl, `${hooksUrl}/${gone.id}/ping`);
  await waitUntil(
    'the endpoint to be disabled',
    async () => !(await app.services.endpoints.show(gone.id)).active,
  );
  const page = await owner.browser.get(`${hooksUrl}/${gone.id}`);
  t.match(
    page.body,
    /<span class="status-bad">Disabled<\/span> <span class="muted">\(The endpoint answered 410 Gone\.\)<\/span>/,
  );
  t.notMatch(page.body, new RegExp(`${gone.id}/ping`), 'no ping button');
  const ping = await owner.browser.submit({}, `${hooksUrl}/${gone.id}/ping`);
  t.equal(ping.statusCode, 409);
  t.equal(
    alertOf(ping.body),
    'This endpoint is disabled (The endpoint answered 410 Gone.) Re-enable it first.',
  );
});

t.test("another app's endpoint and delivery are not found", async (t) => {
  const endpoint = (await app.services.endpoints.list(appId)).find(
    (e) => e.url === receiver.url('/hook'),
  )!;
  const deliveryId = (await app.services.endpoints.recentDeliveries(endpoint.id)).deliveries[0]!.id;
  const intruder = await signUp(app);
  const intruderApp = await createApp(intruder);
  const own = await intruder.browser.act(
    `/portal/apps/${intruderApp}/webhooks`,
    `/portal/apps/${intruderApp}/webhooks`,
    {
      env: 'sandbox',
      url: receiver.url('/intruder'),
    },
  );
  t.equal(own.statusCode, 201);
  const ownEndpoint = (await app.services.endpoints.list(intruderApp))[0]!;

  t.equal(
    (await intruder.browser.get(`${hooksUrl}/${endpoint.id}`)).statusCode,
    404,
    "through the owner's app",
  );
  t.equal(
    (await intruder.browser.get(`/portal/apps/${intruderApp}/webhooks/${endpoint.id}`)).statusCode,
    404,
    'through their own app',
  );
  const ping = await intruder.browser.act(
    '/portal/apps',
    `/portal/apps/${intruderApp}/webhooks/${endpoint.id}/ping`,
  );
  t.equal(ping.statusCode, 404);
  const redeliver = await intruder.browser.act(
    `/portal/apps/${intruderApp}/webhooks/${ownEndpoint.id}`,
    `/portal/apps/${intruderApp}/webhooks/${ownEndpoint.id}/redeliver`,
    { delivery_id: deliveryId },
  );
  t.equal(redeliver.statusCode, 404);
  t.equal(alertOf(redeliver.body), `No webhook delivery with id ${deliveryId}.`);
  // Nothing was sent to the owner's endpoint: the owner's own ping, queued after the refused
  // redelivery, is the one request to arrive.
  const before = receiver.to('/hook').length;
  await owner.browser.act(hooksUrl, `${hooksUrl}/${endpoint.id}/ping`);
  await waitUntil("the owner's ping", () => receiver.to('/hook').length > before);
  t.strictSame(
    receiver
      .to('/hook')
      .slice(before)
      .map((r) => r.event?.type),
    ['ping'],
    "nothing but the owner's ping was sent to the owner's endpoint",
  );
});

t.test('webhook secrets are not in the log', async (t) => {
  t.ok(secrets.length >= 3);
  for (const secret of secrets)
    t.notOk(log().includes(secret), `${secret.slice(0, 14)}… is not logged`);
});

t.test('the page shows the listen command for the app, with the keys to use', async (t) => {
  const command = (env: string) =>
    `MARKETPLACE_KEY=svc_${env}_… MARKETPLACE_URL=${app.config.baseUrl} npm run --silent listen -- --forward-to http://localhost:4000/hooks`;
  let page = await owner.browser.get(hooksUrl);
  t.match(page.body, /<h2 id="listen-heading">Receive events on your machine<\/h2>/);
  t.ok(page.body.includes(`<code id="listen-sandbox">${command('sandbox')}</code>`), 'sandbox');
  t.match(page.body, /a sandbox key of this app \(create one on the Keys page/, 'no key yet');
  t.notOk(page.body.includes('id="listen-live"'), 'no live command without a live key');
  const key = await app.services.keys.create({ appId, env: 'sandbox', name: 'laptop' });
  const { prefix } = (await app.services.keys.list(appId)).find((k) => k.id === key.id)!;
  page = await owner.browser.get(hooksUrl);
  t.ok(
    page.body.includes(
      `Set <code>MARKETPLACE_KEY</code> to one of this app's sandbox keys: laptop (<code>${prefix}…</code>)`,
    ),
    'names the key to put in MARKETPLACE_KEY',
  );
  t.notOk(page.body.includes(key.key), 'never the key itself');
});
