/**
 * GET /api/v1/events: the calling app's events of the last 30 days in its environment, newest
 * first, keyset-paged on created_at, so an integrator whose endpoint was down can catch up.
 * Delivery plays no part here (WEBHOOK_WORKER=false).
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, webhooksApp, type Json } from './support.ts';

const app = await webhooksApp(t, { WEBHOOK_WORKER: 'false' });
const dev = await createDeveloper(app);
const sandbox = await createKey(app, dev, 'sandbox');
const live = await createKey(app, dev, 'live');
const readOnly = await createKey(app, dev, 'sandbox', 'read');
const writeOnly = await createKey(app, dev, 'sandbox', 'listings:write');
const rival = await createDeveloper(app);
const rivalKey = await createKey(app, rival, 'sandbox');

// 23 events: a batch of 20 creates, then an update and an archive of the first, then one live
// create.
const batch = await api(app, 'POST', '/api/v1/listings/batch', sandbox, {
  items: Array.from({ length: 20 }, (_, i) => listingBody({ external_id: `e-${i}` })),
});
const firstId = batch.body.data.results[0].data.id;
await api(app, 'PATCH', `/api/v1/listings/${firstId}`, sandbox, { title: 'Renamed' });
await api(app, 'DELETE', `/api/v1/listings/${firstId}`, sandbox);
await api(app, 'POST', '/api/v1/listings', live, listingBody({ external_id: 'live-1' }));
await api(app, 'POST', '/api/v1/listings', rivalKey, listingBody());

/** Pages through the list; checks meta on every page. */
async function all(
  key: string,
  limit: number,
  query = '',
): Promise<{ items: Json[]; pages: number }> {
  const items: Json[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await api(
      app,
      'GET',
      `/api/v1/events?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      key,
    );
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(res.body)}`);
    pages += 1;
    items.push(...res.body.data);
    if (res.body.meta.count !== res.body.data.length)
      throw new Error('meta.count differs from the page size');
    cursor = res.body.meta.next_cursor;
    if (cursor !== null && cursor !== res.body.data.at(-1).created_at)
      throw new Error('next_cursor is not the last created_at');
  } while (cursor !== null && pages < 50);
  return { items, pages };
}

t.test('pages hold every event exactly once, newest first, for any page size', async (t) => {
  t.equal(app.webhookWorker, null, 'no worker in this file');
  const reference = (await all(sandbox, 100)).items;
  t.equal(reference.length, 22, 'the 22 sandbox events of the app');
  t.strictSame(
    reference.slice(0, 2).map((e: Json) => e.type),
    ['listing.archived', 'listing.updated'],
    'newest first',
  );
  const created = reference.filter((e: Json) => e.type === 'listing.created');
  t.strictSame(
    created.map((e: Json) => e.data.listing.external_id),
    Array.from({ length: 20 }, (_, i) => `e-${19 - i}`),
    'batch items in reverse index order (each its own created_at)',
  );
  const times = reference.map((e: Json) => e.created_at);
  t.strictSame([...times].sort().reverse(), times, 'ordered by created_at');
  t.equal(new Set(times).size, times.length, 'created_at is unique');
  for (const limit of [1, 3, 7, 21, 22, 24]) {
    const { items, pages } = await all(sandbox, limit);
    t.strictSame(
      items.map((e: Json) => e.id),
      reference.map((e: Json) => e.id),
      `limit=${limit}: the same events in the same order`,
    );
    t.equal(
      pages,
      Math.ceil(22 / limit),
      `limit=${limit}: ${pages} pages, the last with next_cursor null`,
    );
  }
  for (const e of reference) {
    t.equal(e.id, e.event_id);
    t.match(e, {
      id: /^[0-9a-f]{32}$/,
      created_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
      data: { listing: { api_environment: 'sandbox' } },
    });
  }
});

t.test('type filter, read scope, environment and app isolation', async (t) => {
  const archived = (await all(sandbox, 10, '&type=listing.archived')).items;
  t.strictSame(
    archived.map((e: Json) => [e.type, e.data.listing.id]),
    [['listing.archived', firstId]],
  );
  t.equal((await all(readOnly, 100)).items.length, 22, 'a read-only key of the app sees them');
  const forbidden = await api(app, 'GET', '/api/v1/events', writeOnly);
  t.equal(forbidden.status, 403, 'without scope read: 403');
  t.equal(forbidden.body.error.code, 'forbidden');
  const liveEvents = (await all(live, 100)).items;
  t.strictSame(
    liveEvents.map((e: Json) => [e.type, e.data.listing.external_id]),
    [['listing.created', 'live-1']],
    'a live key sees live events',
  );
  const res = await api(app, 'GET', '/api/v1/events', live);
  t.equal(res.body.meta.environment, 'live');
  const rivals = (await all(rivalKey, 100)).items;
  t.equal(rivals.length, 1, 'another app sees only its own');
  t.equal((await api(app, 'GET', '/api/v1/events', null)).status, 401, 'anonymous: 401');
  t.equal(
    (await api(app, 'GET', '/api/v1/events?cursor=yesterday', sandbox)).status,
    400,
    'a cursor must be a timestamp',
  );
  t.equal((await api(app, 'GET', '/api/v1/events?limit=101', sandbox)).status, 400);
});

t.test('only the last 30 days are listed', async (t) => {
  const insert = (id: string, daysAgo: number) =>
    app.db.execute(sql`insert into webhook_events (id, app_id, environment, type, data, created_at)
      values (${id}, ${dev.appId}, 'sandbox', 'ping', '{"message":"old"}', now() - ${daysAgo} * interval '1 day')`);
  await insert('0'.repeat(31) + '1', 29);
  await insert('0'.repeat(31) + '2', 31);
  const items = (await all(sandbox, 100)).items;
  t.equal(items.length, 23, 'the 29-day-old event is listed');
  t.strictSame(items.at(-1), {
    id: '0'.repeat(31) + '1',
    event_id: '0'.repeat(31) + '1',
    type: 'ping',
    created_at: items.at(-1).created_at,
    data: { message: 'old' },
  });
  t.notOk(
    items.some((e: Json) => e.id === '0'.repeat(31) + '2'),
    'the 31-day-old one is not',
  );
  // A cursor older than the window yields nothing.
  const old = await api(
    app,
    'GET',
    `/api/v1/events?cursor=${encodeURIComponent(new Date(Date.now() - 29.5 * 86_400_000).toISOString())}`,
    sandbox,
  );
  t.strictSame([old.body.data, old.body.meta.next_cursor], [[], null]);
  // Retention drops whole weeks (test/db/outbox-partitions.test.ts), never a DELETE of rows.
});
