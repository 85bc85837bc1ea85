/**
 * What a process runs (docs/operations.md, "What each process runs"): the saved searches'
 * matcher (SAVED_SEARCH_MATCHER) and the webhook delivery worker (WEBHOOK_WORKER) are set
 * apart. A process without the worker still matches every listing write and records
 * listing.matched in GET /api/v1/events; a process without the matcher delivers webhooks and
 * leaves the writes in the match queue for a process that matches.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { Matcher } from '../../src/saved-searches/matcher-worker.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from '../webhooks/support.ts';
import { publish, save, searcher } from './support.ts';

const JACKET = { title: 'Barbour Bedale waxed jacket', brand: 'barbour', price_cents: 7500 };

/** The listing.matched events GET /api/v1/events lists to `key` about one listing. */
async function matchedEvents(
  app: Parameters<typeof api>[0],
  key: string,
  listingId: string,
): Promise<Json[]> {
  const res = await api(app, 'GET', '/api/v1/events?type=listing.matched', key);
  if (res.status !== 200) throw new Error(`events: ${res.status}`);
  return res.body.data.filter((e: Json) => e.data.listing.id === listingId);
}

t.test('WEBHOOK_WORKER=false: the matcher still records listing.matched', async (t) => {
  const app = await webhooksApp(t, { WEBHOOK_WORKER: 'false' });
  t.equal(app.webhookWorker, null, 'no delivery worker');
  t.ok(app.services.matcher, 'a matcher (SAVED_SEARCH_MATCHER defaults to true)');
  const alerts = await searcher(app);
  const seller = await searcher(app);
  const search = await save(app, alerts.live, { q: 'jacket', brand: 'Barbour' });
  const listing = await publish(app, seller.live, JACKET);
  // The server's own matcher, started by its plugin: nothing here runs a pass.
  await waitUntil(
    'listing.matched in GET /events',
    async () => (await matchedEvents(app, alerts.live, listing.id)).length > 0,
  );
  const [event] = await matchedEvents(app, alerts.live, listing.id);
  t.equal(event.data.saved_search_id, search.id);
  t.equal(event.data.listing.title, JACKET.title);
  const [queued] = await queryRows<{ n: number }>(
    app.db,
    sql`select count(*)::int as n from listing_match_queue`,
  );
  t.equal(queued!.n, 0, 'the match queue is drained');
});

t.test('SAVED_SEARCH_MATCHER=false: deliveries go out, no listing.matched', async (t) => {
  const app = await webhooksApp(t, { SAVED_SEARCH_MATCHER: 'false' });
  t.ok(app.webhookWorker, 'a delivery worker (WEBHOOK_WORKER defaults to true)');
  t.equal(app.services.matcher, null, 'no matcher');
  const receiver = await startReceiver(t);
  const alerts = await searcher(app);
  const seller = await searcher(app);
  await createEndpoint(app, receiver, { appId: alerts.appId, env: 'live', path: '/alerts' });
  await createEndpoint(app, receiver, { appId: seller.appId, env: 'live', path: '/seller' });
  await save(app, alerts.live, { q: 'jacket', brand: 'Barbour' });
  const listing = await publish(app, seller.live, JACKET);
  await waitUntil('listing.created delivered to the seller', () =>
    receiver
      .to('/seller')
      .some(
        (r) =>
          r.event?.type === 'listing.created' && (r.event.data as Json).listing.id === listing.id,
      ),
  );
  // Delivered, yet never matched: the write waits in the queue for a process that matches.
  const queued = await queryRows<{ listing_id: string }>(
    app.db,
    sql`select listing_id::text from listing_match_queue`,
  );
  t.strictSame(
    queued.map((row) => row.listing_id),
    [listing.id],
    'the write is queued for a matcher',
  );
  t.strictSame(await matchedEvents(app, alerts.live, listing.id), [], 'no listing.matched');
  t.strictSame(receiver.to('/alerts'), [], 'nothing delivered to the searching app');

  // A process that matches (standing for another server with SAVED_SEARCH_MATCHER on) takes the
  // queue; this process's worker delivers what it recorded.
  const elsewhere = new Matcher(app.db, new EventsRepository(app.db));
  t.equal((await elsewhere.pass('light')).matched, 1, 'matched by a matching process');
  t.equal((await matchedEvents(app, alerts.live, listing.id)).length, 1, 'now in /events');
  await waitUntil('listing.matched delivered to the searching app', () =>
    receiver.to('/alerts').some((r) => r.event?.type === 'listing.matched'),
  );
});
