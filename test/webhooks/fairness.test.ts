/**
 * Delivery is fair to endpoints (docs/operations.md, "Webhook delivery"): slow endpoints with a
 * backlog are slowed to one attempt at a time and hold only their own slots, so a fast endpoint's
 * deliveries go out beside them; an endpoint that answers quickly gets up to its cap
 * (WEBHOOK_ENDPOINT_CONCURRENCY) at once, never more.
 * The noisy-neighbour case of `npm run bench`, with small numbers.
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, createEndpoint, startReceiver, webhooksApp } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const SLOW_MS = 3000;
const app = await webhooksApp(t, {
  WEBHOOK_CONCURRENCY: '8',
  WEBHOOK_ENDPOINT_CONCURRENCY: '2',
  WEBHOOK_TIMEOUT_MS: '8000',
});
const receiver = await startReceiver(t);
const MEDIUM_MS = 300;
receiver.reply = ({ path }) =>
  path.startsWith('/slow')
    ? { status: 200, delayMs: SLOW_MS }
    : path === '/medium'
      ? { status: 200, delayMs: MEDIUM_MS }
      : {};

/** An app with an endpoint at `path` and a sandbox key. */
async function tenant(path: string) {
  const dev = await createDeveloper(app);
  await createEndpoint(app, receiver, { appId: dev.appId, path });
  return createKey(app, dev, 'sandbox');
}

/** Most requests to `path` the receiver was answering at the same time. */
function mostAtOnce(path: string): number {
  const spans = receiver.to(path).map((r) => [r.at, r.answeredAt ?? Infinity] as const);
  return Math.max(0, ...spans.map(([at]) => spans.filter(([s, e]) => s <= at && at < e).length));
}

t.test('a fast endpoint is not held up by slow endpoints with a backlog', async (t) => {
  // Three slow tenants with 6 events each: 18 attempts of 3 s, all due before the fast tenant's
  // events. First in, first out, those would wait behind all 18.
  const slowKeys = await Promise.all(['/slow-a', '/slow-b', '/slow-c'].map(tenant));
  for (const key of slowKeys) {
    const items = Array.from({ length: 6 }, () => listingBody());
    t.equal((await api(app, 'POST', '/api/v1/listings/batch', key, { items })).status, 200);
  }
  // Let the slow ones take their slots first.
  await waitUntil(
    'the slow endpoints to be busy',
    () => receiver.to('/slow-a').length > 0 || undefined,
  );

  const fastKey = await tenant('/fast');
  const items = Array.from({ length: 5 }, () => listingBody());
  t.equal((await api(app, 'POST', '/api/v1/listings/batch', fastKey, { items })).status, 200);
  await waitUntil(
    'the fast endpoint to get its 5 deliveries',
    () => (receiver.to('/fast').length >= 5 ? true : undefined),
    { timeoutMs: 60_000 },
  );
  // Measured in arrivals, not seconds (a loaded machine slows both sides alike): first in, first
  // out, all 18 slow attempts, due earlier, would arrive before the fast ones.
  const fifth = receiver.received.indexOf(receiver.to('/fast')[4]!);
  const slowBefore = receiver.received.slice(0, fifth).filter((r) => r.path.startsWith('/slow'));
  t.ok(
    slowBefore.length <= 9,
    `the 5 fast deliveries arrived after ${slowBefore.length} of the 18 slow ones, not behind all`,
  );

  await waitUntil(
    'the slow backlog to drain',
    () =>
      ['/slow-a', '/slow-b', '/slow-c'].every((path) => receiver.to(path).length >= 6) || undefined,
    { timeoutMs: 60_000 },
  );
  for (const path of ['/slow-a', '/slow-b', '/slow-c']) {
    t.equal(mostAtOnce(path), 1, `${path}: slowed to one attempt at a time`);
    t.equal(receiver.to(path).length, 6, `${path}: each event once`);
  }
});

t.test('an endpoint that answers quickly gets up to its cap at once, never more', async (t) => {
  const key = await tenant('/medium');
  const items = Array.from({ length: 12 }, () => listingBody());
  t.equal((await api(app, 'POST', '/api/v1/listings/batch', key, { items })).status, 200);
  await waitUntil('12 deliveries', () => receiver.to('/medium').length >= 12 || undefined, {
    timeoutMs: 60_000,
  });
  t.equal(mostAtOnce('/medium'), 2, 'two at once: the window grew to the cap of 2');
  t.equal(receiver.to('/medium').length, 12, 'each event once');
});
