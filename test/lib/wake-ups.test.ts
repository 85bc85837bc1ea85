/**
 * The one wake-up of the background loops (src/lib/wake-ups.ts): a write inside its
 * transaction wakes a lane once its request has been answered, once per request however many
 * writes it made; a committed one wakes it now; outside a request, after the current turn. And
 * in the server: a listing write wakes the delivery worker after its commit when it queued a
 * delivery, and the matcher when it queued a listing to match (there is a saved search), each
 * once; a write that queued neither wakes neither (issue #57).
 */
import { sql, type SQL } from 'drizzle-orm';
import Fastify from 'fastify';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { WakeUps, type WakeUpLane } from '../../src/lib/wake-ups.ts';
import tracing from '../../src/plugins/tracing.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';
import { drained, publish, save, searcher } from '../saved-searches/support.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from '../webhooks/support.ts';

t.test('in a request: after the answer, once per lane', async (t) => {
  const wakeUps = new WakeUps();
  const woken: string[] = [];
  wakeUps.on('matching', () => woken.push('matching'));
  wakeUps.on('deliveries', () => woken.push('deliveries'));
  const app = Fastify();
  await app.register(tracing);
  let beforeAnswer: string[] | null = null;
  app.post('/write', async () => {
    wakeUps.afterCommit('matching');
    wakeUps.afterCommit('matching');
    wakeUps.afterCommit('deliveries');
    await new Promise((resolve) => setImmediate(resolve));
    beforeAnswer = [...woken];
    return { ok: true };
  });
  app.post('/committed', async () => {
    wakeUps.now('deliveries');
    beforeAnswer = [...woken];
    return { ok: true };
  });
  t.teardown(() => app.close());

  const res = await app.inject({ method: 'POST', url: '/write' });
  t.equal(res.statusCode, 200);
  t.strictSame(beforeAnswer, [], 'nothing woken while the request is still being served');
  t.strictSame(woken, ['matching', 'deliveries'], 'each lane woken once, after the answer');

  woken.length = 0;
  await app.inject({ method: 'POST', url: '/committed' });
  t.strictSame(beforeAnswer, ['deliveries'], 'now() wakes at once');
  t.strictSame(woken, ['deliveries'], 'and only then');

  woken.length = 0;
  await app.inject({ method: 'POST', url: '/write' });
  t.strictSame(woken, ['matching', 'deliveries'], "the next request's wake-ups are its own");
});

t.test('outside a request: after the current turn', async (t) => {
  const wakeUps = new WakeUps();
  let woken = 0;
  wakeUps.on('matching', () => (woken += 1));
  wakeUps.afterCommit('matching');
  t.equal(woken, 0, 'not within the turn that asked');
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(woken, 1, 'then once');
});

t.test(
  'a listing write wakes a loop only when it queued work for it, after its commit',
  async (t) => {
    const app = await webhooksApp(t);
    const receiver = await startReceiver(t);
    const seller = await searcher(app);
    const count = async (table: SQL) =>
      (await queryRows<{ n: number }>(app.db, sql`select count(*)::int as n from ${table}`))[0]!.n;
    const woken: { lane: WakeUpLane; committed: number }[] = [];
    let pending: Promise<void>[] = [];
    for (const lane of ['matching', 'deliveries'] as const)
      app.services.wakeUps.on(lane, () => {
        // What another connection sees when the lane is woken: the write, committed.
        pending.push(
          count(sql`listings`).then((committed) => void woken.push({ lane, committed })),
        );
      });
    /** The lanes woken since the last call, and how many listings each saw. */
    const heard = async () => {
      await Promise.all(pending);
      pending = [];
      return woken.splice(0).sort((a, b) => a.lane.localeCompare(b.lane));
    };
    const write = async (
      method: 'POST' | 'PATCH' | 'DELETE',
      url: string,
      status: number,
      body?: Json,
    ) => {
      const res = await api(app, method, url, seller.sandbox, body);
      t.equal(res.status, status, `${method} ${url}: ${status}`);
      return res.body;
    };

    // No endpoint to deliver to and no saved search: every kind of write records its event, and
    // queues nothing, so neither loop is woken for it.
    const { data: created } = await write(
      'POST',
      '/api/v1/listings',
      201,
      listingBody({ external_id: 'w1' }),
    );
    await write('PATCH', `/api/v1/listings/${created.id}`, 200, { title: 'Patched' });
    await write('POST', '/api/v1/listings', 200, listingBody({ external_id: 'w1' }));
    const batch = await write('POST', '/api/v1/listings/batch', 200, {
      items: [listingBody(), listingBody()],
    });
    t.equal(batch.meta.created, 2, 'a batch of two new listings');
    await write('DELETE', `/api/v1/listings/${created.id}`, 200);
    t.strictSame(await heard(), [], 'five writes woke neither lane');
    t.equal(await count(sql`webhook_events`), 6, 'their events recorded (GET /events reads them)');
    t.equal(await count(sql`webhook_deliveries`), 0, 'no delivery');
    t.equal(await count(sql`listing_match_queue`), 0, 'nothing to match');

    // An endpoint: the delivery worker is woken, once, after the commit, and delivers.
    await createEndpoint(app, receiver, { appId: seller.appId, path: '/woken' });
    const delivered = await publish(app, seller.sandbox, { title: 'Delivered' });
    t.strictSame(await heard(), [{ lane: 'deliveries', committed: 4 }], 'the worker alone');
    await waitUntil('listing.created delivered', () =>
      receiver
        .to('/woken')
        .some(
          (r) => r.event?.type === 'listing.created' && r.event.data.listing.id === delivered.id,
        ),
    );

    // A saved search (one this listing does not match, so no listing.matched wakes the worker
    // again): the write queues its listing, and the matcher is woken too.
    await save(app, seller.sandbox, { q: 'lamp' });
    await publish(app, seller.sandbox, { title: 'Oak table' });
    t.strictSame(
      await heard(),
      [
        { lane: 'deliveries', committed: 5 },
        { lane: 'matching', committed: 5 },
      ],
      'each lane woken once, the listing visible',
    );
    await drained(app);

    // A write that writes nothing (an archived listing is not edited) queues nothing either.
    await write('PATCH', `/api/v1/listings/${created.id}`, 409, { title: 'Refused' });
    t.strictSame(await heard(), [], 'a refused write wakes nobody');
  },
);
