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

t.test(
  "one developer's many endpoints with a backlog do not hold up another's delivery",
  async (t) => {
    // One owner, two apps, four endpoints each: eight endpoints with a backlog of 12 each (96
    // attempts of 200 ms for the worker's 8 slots). Taking turns between endpoints alone, the
    // other developer's one endpoint would be one of nine, its attempt the newest of all: it would
    // wait behind most of the backlog. Turns are between owners first.
    receiver.reply = ({ path }) =>
      path.startsWith('/many-') ? { status: 200, delayMs: 200 } : { status: 200 };
    const owner = await createDeveloper(app);
    const second = await app.services.apps.create({
      ownerUsername: owner.username,
      name: 'second app',
    });
    const paths: string[] = [];
    for (const [n, appId] of [owner.appId, second.id].entries()) {
      for (let i = 0; i < 4; i += 1) {
        const path = `/many-${n}-${i}`;
        paths.push(path);
        await createEndpoint(app, receiver, { appId, path });
      }
    }
    const otherKey = await tenant('/lone');
    const ownerKeys = [
      await createKey(app, owner, 'sandbox'),
      await createKey(app, { ...owner, appId: second.id }, 'sandbox'),
    ];
    for (const key of ownerKeys) {
      const items = Array.from({ length: 12 }, () => listingBody());
      t.equal((await api(app, 'POST', '/api/v1/listings/batch', key, { items })).status, 200);
    }
    const backlog = () => receiver.received.filter((r) => r.path.startsWith('/many-')).length;
    await waitUntil('the backlog to be under way', () => backlog() >= 8 || undefined);

    const atWrite = backlog();
    t.equal(
      (await api(app, 'POST', '/api/v1/listings', otherKey, listingBody())).status,
      201,
      "the other developer's listing",
    );
    await waitUntil('the lone delivery', () => receiver.to('/lone')[0], { timeoutMs: 60_000 });
    const meanwhile =
      receiver.received
        .slice(0, receiver.received.indexOf(receiver.to('/lone')[0]!))
        .filter((r) => r.path.startsWith('/many-')).length - atWrite;
    // The worker's 8 slots were busy with the backlog when the write came: its attempt takes
    // the first slot that frees (a few more of the backlog may start meanwhile), not its turn
    // after the 96 - atWrite older ones.
    t.ok(atWrite <= 48, `the backlog was under way: ${atWrite} of 96 sent when the write came`);
    t.ok(
      meanwhile <= 16,
      `the other developer's delivery arrived after ${meanwhile} more of the backlog, ` +
        `not behind the ${96 - atWrite} left`,
    );

    await waitUntil('the backlog to drain', () => backlog() >= 96 || undefined, {
      timeoutMs: 60_000,
    });
    t.equal(backlog(), 96, 'each of the backlog once');
    for (const path of paths) t.equal(receiver.to(path).length, 12, `${path}: its 12`);
  },
);
