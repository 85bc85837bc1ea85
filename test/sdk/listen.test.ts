/**
 * The SDK's `listen` (sdk/src/listen.ts, the library function behind the command) against a live
 * server, forwarding to a real local HTTP receiver: a listing created, updated and archived
 * through the API reaches the receiver as three deliveries, in order, each with the body a real
 * delivery carries, verified by the SDK's verifyWebhook and by the standardwebhooks library with
 * the printed secret; `events` filters; `since` replays; a forward URL that is not loopback is
 * refused unless allowed; the app's endpoints are untouched; a plain-http API URL to another host
 * is refused unless allowed, and `*.localhost` hosts are reached at 127.0.0.1 without a lookup
 * (issue #43 item 6). (The command: ./listen-cli.test.ts; packed: test/consumers/
 * sdk-package.ci.ts.)
 */
import { createHmac } from 'node:crypto';
import t, { type Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import {
  apiKeyAuth,
  createMarketplaceClient,
  listen,
  ListenError,
  newListenSecret,
  verifyWebhook,
  type Forward,
} from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { localReceiver } from '../helpers/local-receiver.ts';
import { waitUntil } from '../helpers/wait.ts';

// The plan ends the file once both tests are done: the app's idle keep-alive connections (72 s)
// would otherwise keep it waiting for the teardown that closes them.
t.plan(3);
const { app, baseUrl } = await listeningApp(t, { WEBHOOK_WORKER: 'false' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const api = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });

const { received, url } = await localReceiver(t, (path) => (path === '/fails' ? 500 : 204));
const hooks = url('/hooks');

/** Runs listen until the test's end; resolves once it is ready. */
async function started(
  t: Test,
  options: Partial<Parameters<typeof listen>[0]> = {},
): Promise<{ forwards: Forward[]; secret: string; done: Promise<void> }> {
  const stop = new AbortController();
  const forwards: Forward[] = [];
  const secret = newListenSecret();
  let ready: () => void;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  const done = listen({
    baseUrl,
    auth: apiKeyAuth(key),
    forwardTo: hooks,
    secret,
    signal: stop.signal,
    waitSeconds: 5,
    onReady: () => ready(),
    onForward: (forward) => forwards.push(forward),
    ...options,
  });
  t.teardown(async () => {
    stop.abort();
    await done;
  });
  await Promise.race([isReady, done]);
  return { forwards, secret, done };
}

t.test('created, updated, archived: three verified deliveries, in order', async (t) => {
  received.length = 0;
  const { forwards, secret } = await started(t);
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'whsec_ + base64 of 32 bytes');
  const { data: listing } = await api.listings.create({ title: 'Forwarded', price_cents: 900 });
  await api.listings.update(listing.id, { title: 'Forwarded, renamed' });
  await api.listings.archive(listing.id);
  await waitUntil('three forwards', () => forwards.length >= 3, { timeoutMs: 10_000 });
  t.strictSame(
    forwards.map((f) => [f.type, f.status]),
    [
      ['listing.created', 204],
      ['listing.updated', 204],
      ['listing.archived', 204],
    ],
    'each forwarded once, in order, with the local status',
  );
  t.equal(received.length, 3);
  const { data: listed } = await api.events.list({ limit: 3 });
  // The Standard Webhooks libraries verify the forwards in their default mode, with the receiver
  // code docs/webhooks.md gives for endpoint secrets (`replace(/^svc_/, '')`, a no-op on listen's
  // `whsec_…`, "Developing locally"); svix wraps the same verifier.
  const standardForm = secret.replace(/^svc_/, '');
  t.equal(standardForm, secret, "listen's secret is already in the standard form");
  const standard = new Webhook(standardForm);
  const svix = new SvixWebhook(standardForm);
  for (const [i, delivery] of received.entries()) {
    const event = await verifyWebhook(secret, delivery.raw, delivery.headers);
    t.equal(event.type, forwards[i]!.type, `${event.type}: verifyWebhook accepts it`);
    t.match(standard.verify(delivery.raw, delivery.headers as never), { type: event.type });
    t.doesNotThrow(() => svix.verify(delivery.raw, delivery.headers as never), 'svix too');
    t.equal(
      delivery.headers['x-service-signature'],
      createHmac('sha256', secret).update(delivery.raw).digest('hex'),
      'X-Service-Signature: hex HMAC of the body keyed with the secret as printed (the spec)',
    );
    t.equal(event.id, delivery.headers['webhook-id'], 'body id: the delivery id');
    t.equal(delivery.headers['x-service-delivery'], event.id);
    t.equal(delivery.headers['x-service-event'], event.type);
    t.equal(delivery.headers['user-agent'], 'Service-Webhooks/1.0');
    const original = listed.find((e) => e.event_id === event.event_id);
    t.ok(original, 'event_id: an event of GET /events');
    t.strictSame(
      { ...event, id: original!.id },
      original,
      'the body a real delivery carries: event_id, type, created_at, data',
    );
    t.equal((event.data as { listing: { id: string } }).listing.id, listing.id);
  }
  t.strictSame(
    (await app.services.endpoints.list(developer.appId)).length,
    0,
    'no endpoint registered',
  );
});

t.test('events filter, since, local failures, remote hosts', async (t) => {
  received.length = 0;
  const before = new Date().toISOString();
  const { data: one } = await api.listings.create({ title: 'Filtered', price_cents: 901 });
  await api.listings.update(one.id, { title: 'Filtered, renamed' });
  const { forwards } = await started(t, {
    since: before,
    events: ['listing.updated', 'listing.archived'],
  });
  await waitUntil('the replayed update', () => forwards.length >= 1, { timeoutMs: 10_000 });
  await api.listings.archive(one.id);
  await waitUntil('the archive', () => forwards.length >= 2, { timeoutMs: 10_000 });
  t.strictSame(
    forwards.map((f) => f.type),
    ['listing.updated', 'listing.archived'],
    'since replays; the create is filtered out',
  );

  const failing = await started(t, { forwardTo: hooks.replace('/hooks', '/fails') });
  await api.listings.create({ title: 'Fails locally', price_cents: 902 });
  await waitUntil('a failed forward', () => failing.forwards.length >= 1, { timeoutMs: 10_000 });
  t.equal(failing.forwards[0]!.status, 500, 'the local status is reported');

  const secret = newListenSecret();
  await t.rejects(
    listen({ baseUrl, auth: apiKeyAuth(key), forwardTo: 'https://example.com/hooks', secret }),
    ListenError,
    'a host that is not loopback is refused',
  );
  const stop = new AbortController();
  const remote = listen({
    baseUrl,
    auth: apiKeyAuth(key),
    forwardTo: 'http://192.0.2.1/hooks',
    secret,
    allowRemote: true,
    signal: stop.signal,
    onReady: () => stop.abort(),
  });
  await t.resolves(remote, 'allowed explicitly, it starts (and stops on abort)');
});

t.test(
  'the API URL: https, or plain http to this machine; *.localhost without a lookup',
  async (t) => {
    const secret = newListenSecret();
    /** A fetch that records each URL asked for and answers an empty events page. */
    const recording = () => {
      const urls: string[] = [];
      const fake = (async (input: string | URL | Request) => {
        urls.push(input instanceof Request ? input.url : String(input));
        const page = { data: [], meta: { version: 'v1', request_id: 'r', next_cursor: 'c' } };
        return new Response(JSON.stringify(page), {
          headers: { 'content-type': 'application/json' },
        });
      }) as typeof fetch;
      return { urls, fake };
    };

    const refused = recording();
    const stopRefused = new AbortController();
    await t.rejects(
      listen({
        baseUrl: 'http://192.0.2.1:3000',
        auth: apiKeyAuth(key),
        forwardTo: hooks,
        secret,
        fetch: refused.fake,
        // Were it not refused, it would stop at its first answer.
        signal: stopRefused.signal,
        onReady: () => stopRefused.abort(),
      }),
      { name: 'ListenError', message: /plain http .*--allow-insecure-http/ },
      'plain http to another host: refused',
    );
    t.strictSame(refused.urls, [], 'before anything is sent');

    for (const [baseUrl, options] of [
      ['http://192.0.2.1:3000', { allowInsecureHttp: true }],
      ['https://api.example.com', {}],
      ['http://[::1]:3000', {}],
    ] as const) {
      const allowed = recording();
      const stop = new AbortController();
      await listen({
        baseUrl,
        auth: apiKeyAuth(key),
        forwardTo: hooks,
        secret,
        fetch: allowed.fake,
        signal: stop.signal,
        onReady: () => stop.abort(),
        ...options,
      });
      t.match(allowed.urls, [`${new URL(baseUrl).origin}/api/v1/events?`], `${baseUrl}: polled`);
    }

    // *.localhost names this machine (RFC 6761 §6.3); no resolver here has an entry for them, and
    // one that did could answer with any address: both hosts are reached at 127.0.0.1.
    const port = new URL(baseUrl).port;
    const asked: string[] = [];
    const forwards: Forward[] = [];
    let ready = false;
    received.length = 0;
    const stop = new AbortController();
    const done = listen({
      baseUrl: `http://api.localhost:${port}`,
      auth: apiKeyAuth(key),
      forwardTo: hooks.replace('localhost', 'hooks.localhost'),
      secret,
      signal: stop.signal,
      waitSeconds: 5,
      onReady: () => (ready = true),
      onForward: (forward) => forwards.push(forward),
      fetch: (input, init) => {
        asked.push(input instanceof Request ? input.url : String(input));
        return fetch(input, init);
      },
    });
    t.teardown(async () => {
      stop.abort();
      await done;
    });
    await waitUntil('a first poll answered at api.localhost', () => ready, { timeoutMs: 10_000 });
    await api.listings.create({ title: 'To a .localhost receiver', price_cents: 903 });
    await waitUntil('the forward', () => forwards.length >= 1, { timeoutMs: 10_000 });
    t.equal(forwards[0]!.status, 204, 'forwarded');
    t.equal(received.length, 1, 'the receiver on 127.0.0.1 got it');
    t.ok(asked.length >= 2, `polls and the forward went through fetch (${asked.length})`);
    t.strictSame(
      [...new Set(asked.map((url) => new URL(url).hostname))],
      ['127.0.0.1'],
      'every request went to 127.0.0.1',
    );
  },
);
