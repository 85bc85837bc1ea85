/**
 * Failures and retries (docs/webhooks.md, "Deliveries") with a short schedule: a non-2xx answer, a
 * redirect, a timeout and a refused connection are failures, retried with the same delivery id on
 * WEBHOOK_RETRY_SCHEDULE and then marked failed, recorded on the endpoint; 410 disables the
 * endpoint; an operator can redeliver. Each case has its own app (endpoints get every event of
 * their app), and pings target one endpoint, so the cases run side by side.
 */
import { createServer } from 'node:net';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, createEndpoint, startReceiver, webhooksApp } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

// Three attempts in all: the first, then after ~1 s, then after ~1 s more. Timeout 8 s: the
// receiver shares its process with in-process PGlite, and on a loaded CI machine a TLS round
// trip can take well over a second, which must not count as a timeout.
const app = await webhooksApp(t, { WEBHOOK_RETRY_SCHEDULE: '1,1', WEBHOOK_TIMEOUT_MS: '8000' });
const receiver = await startReceiver(t);
// The cases wait on the schedule; they run side by side.
t.jobs = 6;

async function endpointAt(path: string) {
  const dev = await createDeveloper(app);
  const endpoint = await createEndpoint(app, receiver, { appId: dev.appId, path });
  return { dev, endpoint };
}

async function finished(app: FastifyInstance, endpointId: string, deliveryId: string) {
  return waitUntil(
    `delivery ${deliveryId} to finish`,
    async () => {
      const { deliveries } = await app.services.endpoints.recentDeliveries(endpointId);
      const delivery = deliveries.find((d) => d.id === deliveryId);
      return delivery && delivery.status !== 'pending' ? delivery : undefined;
    },
    { timeoutMs: 45_000 },
  );
}

const CONFLICT = { code: 'conflict', statusCode: 409 };

/** Answers changed during a test, by path. */
const override = new Map<string, number>();

receiver.reply = ({ path }) => {
  const forced = override.get(path);
  if (forced !== undefined) return { status: forced };
  const earlier = receiver.to(path).length;
  switch (path) {
    case '/fail':
      return { status: 500 };
    case '/gone':
      return { status: 410 };
    case '/redirect':
      return { status: 302, headers: { location: receiver.url('/elsewhere') } };
    case '/slow':
      return { status: 200, delayMs: 20_000 };
    case '/flaky':
      return { status: earlier === 0 ? 503 : 204 };
    default:
      return { status: 200 };
  }
};

t.test('failures are retried on the schedule with the same id, then marked failed', async (t) => {
  const { endpoint } = await endpointAt('/fail');
  const started = Date.now();
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, {
    status: 'failed',
    attempts: 3,
    last_response_code: 500,
    last_error: 'HTTP 500',
    next_attempt_at: null,
  });
  const got = receiver.to('/fail');
  t.equal(got.length, 3, 'three attempts reached the receiver');
  t.strictSame(
    new Set(got.map((r) => r.event?.id)),
    new Set([delivery_id]),
    'all with the same delivery id',
  );
  t.strictSame(new Set(got.map((r) => r.headers['webhook-id'])), new Set([delivery_id]));
  t.ok(
    got.every((r) => r.verifyError === null),
    'each attempt is signed (with its own timestamp)',
  );
  t.ok(Date.now() - started >= 2000, 'the attempts were spaced by the schedule (1 s, 1 s)');
  const shown = await app.services.endpoints.show(endpoint.id);
  t.match(shown, { active: true, last_error: 'HTTP 500' });
  t.ok(
    shown.last_failure_at && Date.parse(shown.last_failure_at) >= started - 1000,
    'last_failure_at is recorded',
  );

  t.test('redeliver sends it again with the same id and a fresh schedule', async (t) => {
    override.set('/fail', 200);
    const again = await app.services.endpoints.redeliver(delivery_id);
    t.strictSame(again, { delivery_id, status: 'pending' });
    const done = await finished(app, endpoint.id, delivery_id);
    t.match(done, { status: 'succeeded', attempts: 1, last_response_code: 200, last_error: null });
    t.equal(receiver.to('/fail').at(-1)!.event!.id, delivery_id);
  });
});

t.test('410 Gone disables the endpoint', async (t) => {
  const { dev, endpoint } = await endpointAt('/gone');
  const key = await createKey(app, dev, 'sandbox');
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, { status: 'failed', attempts: 1, last_response_code: 410 });
  t.match(await app.services.endpoints.show(endpoint.id), { active: false, last_error: /410/ });
  await t.rejects(
    app.services.endpoints.ping(endpoint.id),
    CONFLICT,
    'no ping to a disabled endpoint',
  );
  await t.rejects(
    app.services.endpoints.redeliver(delivery_id),
    CONFLICT,
    'no redelivery to a disabled endpoint',
  );
  // a listing change is still recorded as an event, but nothing is delivered to the endpoint
  t.equal((await api(app, 'POST', '/api/v1/listings', key, listingBody())).status, 201);
  const [row] = await queryRows<{ events: number; deliveries: number }>(
    app.db,
    sql`select (select count(*)::int from webhook_events where app_id = ${dev.appId} and type = 'listing.created') as events,
               (select count(*)::int from webhook_deliveries where endpoint_id = ${endpoint.id}) as deliveries`,
  );
  t.strictSame(
    row,
    { events: 1, deliveries: 1 },
    'the event exists; no new delivery for the disabled endpoint',
  );
  t.equal(receiver.to('/gone').length, 1, 'one attempt only');
});

t.test('a redirect is a failure and is not followed', async (t) => {
  const { endpoint } = await endpointAt('/redirect');
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, {
    status: 'failed',
    attempts: 3,
    last_response_code: 302,
    last_error: /^redirect \(HTTP 302 to https:.*\/elsewhere\) not followed$/,
  });
  t.equal(receiver.to('/elsewhere').length, 0, 'the Location was never requested');
});

t.test('a timeout is a failure', async (t) => {
  const { endpoint } = await endpointAt('/slow');
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  await t.rejects(
    app.services.endpoints.redeliver(delivery_id),
    CONFLICT,
    'a pending delivery is not redelivered',
  );
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, {
    status: 'failed',
    attempts: 3,
    last_response_code: null,
    last_error: 'timeout after 8000 ms',
  });
  t.match(await app.services.endpoints.show(endpoint.id), { last_error: 'timeout after 8000 ms' });
});

t.test('a transient failure is retried until it succeeds', async (t) => {
  const { endpoint } = await endpointAt('/flaky');
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, {
    status: 'succeeded',
    attempts: 2,
    last_response_code: 204,
    last_error: null,
  });
  t.strictSame(
    receiver.to('/flaky').map((r) => [r.status, r.event?.id]),
    [
      [503, delivery_id],
      [204, delivery_id],
    ],
  );
  t.match(
    await app.services.endpoints.show(endpoint.id),
    { active: true, last_error: 'HTTP 503' },
    'the failure stays recorded',
  );
});

t.test('a refused connection is a failure', async (t) => {
  // A port that was free a moment ago: nobody listens there.
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  const dev = await createDeveloper(app);
  const endpoint = await app.services.endpoints.create({
    appId: dev.appId,
    env: 'sandbox',
    url: `https://127.0.0.1:${port}/nobody`,
  });
  const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
  const delivery = await finished(app, endpoint.id, delivery_id);
  t.match(delivery, {
    status: 'failed',
    attempts: 3,
    last_response_code: null,
    last_error: /^connection error: ECONNREFUSED/,
  });
});
