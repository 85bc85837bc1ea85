/**
 * Events reach a real HTTPS receiver (docs/webhooks.md): every event type from single,
 * batch and upsert writes, signed both ways and verified with the receivers' helper, with the
 * spec's headers and body, to every endpoint of the app that made the change in the listing's
 * environment, and to nobody else.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const app = await webhooksApp(t);
const receiver = await startReceiver(t);

const dev = await createDeveloper(app);
const sandbox = await createKey(app, dev, 'sandbox');
await app.services.apps.approve(dev.appId);
const a = await createEndpoint(app, receiver, { appId: dev.appId, path: '/a' });
const b = await createEndpoint(app, receiver, { appId: dev.appId, path: '/b' });
const live = await createEndpoint(app, receiver, { appId: dev.appId, env: 'live', path: '/live' });
const rival = await createDeveloper(app);
const rivalKey = await createKey(app, rival, 'sandbox');
await createEndpoint(app, receiver, { appId: rival.appId, path: '/rival' });

const HEX32 = /^[0-9a-f]{32}$/;
const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The events the receiver got at a path, as [type, listing id or message]. */
const seen = (path: string) =>
  receiver
    .to(path)
    .map((r) => [
      r.event?.type,
      (r.event?.data as Json)?.listing?.external_id ?? (r.event?.data as Json)?.message,
    ]);

t.test('each write emits its event, delivered to both endpoints of the app', async (t) => {
  // single create, then an upsert of the same external_id (listing.updated, never created)
  const created = await api(app, 'POST', '/api/v1/listings', sandbox, listingBody(), {
    'idempotency-key': 'single-1',
  });
  t.equal(created.status, 201);
  const upserted = await api(
    app,
    'POST',
    '/api/v1/listings',
    sandbox,
    listingBody({ title: 'Upserted title' }),
    { 'idempotency-key': 'single-1' },
  );
  t.equal(upserted.status, 200, 'upsert answers 200');
  const id = created.body.data.id;
  t.equal(
    (await api(app, 'PATCH', `/api/v1/listings/${id}`, sandbox, { price_cents: 777 })).status,
    200,
  );
  t.equal((await api(app, 'DELETE', `/api/v1/listings/${id}`, sandbox)).status, 200);
  t.equal(
    (await api(app, 'DELETE', `/api/v1/listings/${id}`, sandbox)).status,
    200,
    'archiving again: no second event',
  );
  // an upsert of an archived listing is a 409 and emits nothing
  t.equal(
    (
      await api(app, 'POST', '/api/v1/listings', sandbox, listingBody(), {
        'idempotency-key': 'single-1',
      })
    ).status,
    409,
  );

  // batch: two creates, a later item upserting the first, an invalid item; then a batch upsert
  const batch = await api(app, 'POST', '/api/v1/listings/batch', sandbox, {
    items: [
      listingBody({ external_id: 'batch-1' }),
      listingBody({ external_id: 'batch-2' }),
      listingBody({ external_id: 'batch-1', title: 'Batch upsert' }),
      { title: 'x' },
    ],
  });
  t.equal(batch.status, 200);
  t.match(batch.body.meta, { created: 2, updated: 1, failed: 1 });
  const batch2 = await api(app, 'POST', '/api/v1/listings/batch', sandbox, {
    items: [listingBody({ external_id: 'batch-2', price_cents: 5 })],
  });
  t.match(batch2.body.meta, { created: 0, updated: 1 });

  const expected = [
    ['listing.created', 'single-1'],
    ['listing.updated', 'single-1'],
    ['listing.updated', 'single-1'],
    ['listing.archived', 'single-1'],
    ['listing.created', 'batch-1'],
    ['listing.created', 'batch-2'],
    ['listing.updated', 'batch-1'],
    ['listing.updated', 'batch-2'],
  ];
  const sort = (rows: unknown[][]) => rows.map((r) => r.join(' ')).sort();
  await waitUntil(
    '8 deliveries at /a and /b',
    () => receiver.to('/a').length >= 8 && receiver.to('/b').length >= 8,
  );
  t.strictSame(sort(seen('/a')), sort(expected), '/a got every event once');
  t.strictSame(sort(seen('/b')), sort(expected), '/b got every event once');

  // the events of one listing, in the order they were recorded (created_at), are the lifecycle
  const single = receiver
    .to('/a')
    .map((r) => r.event!)
    .filter((e) => (e.data as Json).listing.external_id === 'single-1')
    .sort((x, y) => x.created_at.localeCompare(y.created_at));
  t.strictSame(
    single.map((e) => e.type),
    ['listing.created', 'listing.updated', 'listing.updated', 'listing.archived'],
  );
  t.strictSame(
    single.map((e) => (e.data as Json).listing.status),
    ['draft', 'draft', 'draft', 'archived'],
  );
  t.equal(
    (single[1]!.data as Json).listing.title,
    'Upserted title',
    'data.listing is the listing after the change',
  );
  t.equal((single[2]!.data as Json).listing.price_cents, 777);
});

t.test(
  'every delivery is signed both ways and carries the headers and body of docs/webhooks.md',
  async (t) => {
    const byEvent = new Map<string, string[]>();
    for (const r of [...receiver.to('/a'), ...receiver.to('/b')]) {
      t.equal(r.verifyError, null, `verified with the helper (${r.verifyError ?? 'ok'})`);
      const e = r.event!;
      t.match(e.id, HEX32, 'body id: 32 hex');
      t.match(e.event_id, HEX32, 'body event_id: 32 hex');
      t.match(e.created_at, TS, 'created_at at microsecond precision');
      t.equal(r.headers['content-type'], 'application/json');
      t.equal(r.headers['user-agent'], 'Service-Webhooks/1.0');
      t.equal(r.headers['x-service-event'], e.type, 'X-Service-Event is the type');
      t.equal(r.headers['x-service-delivery'], e.id, 'X-Service-Delivery is the body id');
      t.equal(r.headers['webhook-id'], e.id, 'webhook-id is the body id');
      t.match(r.headers['x-service-signature'], /^[0-9a-f]{64}$/);
      t.match(r.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
      t.ok(
        Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000) < 60,
        'webhook-timestamp is now',
      );
      const listing = (e.data as Json).listing;
      for (const field of [
        'id',
        'title',
        'price_cents',
        'status',
        'api_environment',
        'external_id',
        'seller',
        'created_at',
      ]) {
        t.ok(field in listing, `data.listing.${field}`);
      }
      t.equal(listing.api_environment, 'sandbox');
      byEvent.set(e.event_id, [...(byEvent.get(e.event_id) ?? []), e.id]);
    }
    for (const [eventId, deliveryIds] of byEvent) {
      t.equal(deliveryIds.length, 2, `event ${eventId} went to two endpoints`);
      t.not(deliveryIds[0], deliveryIds[1], 'with a delivery id each');
    }

    // the raw bytes are what was signed: a receiver that re-serializes would not verify
    const first = receiver.to('/a')[0]!;
    t.equal(first.raw.toString('utf8'), first.raw.toString('utf8').trim());
    t.same(Object.keys(JSON.parse(first.raw.toString('utf8'))), [
      'id',
      'event_id',
      'type',
      'created_at',
      'data',
    ]);
  },
);

t.test(
  'no event leaks to another app, another environment, or to a change without one',
  async (t) => {
    t.equal(receiver.to('/live').length, 0, 'the live endpoint got no sandbox event');
    t.equal(receiver.to('/rival').length, 0, "another app's endpoint got nothing");
    t.equal((await api(app, 'POST', '/api/v1/listings', rivalKey, listingBody())).status, 201);
    await waitUntil('the rival delivery', () => receiver.to('/rival').length === 1);
    t.equal(receiver.to('/a').length, 8, 'and the rival change did not reach /a');
  },
);

t.test(
  'the event is part of the listing transaction: a change that rolls back leaves no event',
  async (t) => {
    // The outbox's insert fails for this listing (a trigger of the test's own): the statement
    // that makes the change records its event, so nothing of either may remain.
    await app.db
      .execute(sql`create function refuse_roll_me_back() returns trigger language plpgsql as $$
      begin
        if new.data::json -> 'listing' ->> 'title' = 'Roll me back' then
          raise exception 'a recording fails';
        end if;
        return new;
      end $$`);
    await app.db.execute(sql`create trigger refuse_roll_me_back before insert on webhook_events
      for each row execute function refuse_roll_me_back()`);
    t.teardown(async () => {
      // DROP TRIGGER takes webhook_events' strongest lock: against the worker's claim (which
      // reads the table) PostgreSQL may end it as a deadlock (40P01); it is tried again.
      for (let attempt = 1; ; attempt += 1) {
        try {
          await app.db.execute(sql`drop trigger if exists refuse_roll_me_back on webhook_events`);
          break;
        } catch (err) {
          const code = (err as { cause?: { code?: string }; code?: string }).cause?.code;
          if (code !== '40P01' || attempt >= 5) throw err;
        }
      }
      await app.db.execute(sql`drop function refuse_roll_me_back()`);
    });
    const count = async () =>
      (
        await queryRows<{ n: number }>(
          app.db,
          sql`select count(*)::int as n from webhook_events where app_id = ${dev.appId}`,
        )
      )[0]!.n;
    const before = await count();
    const res = await api(
      app,
      'POST',
      '/api/v1/listings',
      sandbox,
      listingBody({ title: 'Roll me back' }),
    );
    t.equal(res.status, 500);
    t.equal(await count(), before, 'no event recorded');
    const [listings] = await queryRows<{ n: number }>(
      app.db,
      sql`select count(*)::int as n from listings where title = 'Roll me back'`,
    );
    t.equal(listings!.n, 0, 'and no listing');
  },
);

t.test('ping goes to the one endpoint it names, live endpoints included', async (t) => {
  const { delivery_id } = await app.services.endpoints.ping(live.id);
  t.match(delivery_id, HEX32);
  const got = await waitUntil('the ping', () =>
    receiver.to('/live').find((r) => r.event?.id === delivery_id),
  );
  t.equal(got.verifyError, null);
  t.strictSame(got.event!.data, { message: 'Test delivery from the Marketplace dashboard' });
  t.equal(got.headers['x-service-event'], 'ping');
  t.equal(
    receiver.to('/a').filter((r) => r.event?.type === 'ping').length,
    0,
    'not to the other endpoints',
  );

  // The worker records the outcome after the receiver has answered: wait for it.
  const recorded = await waitUntil('the ping outcome', async () => {
    const { deliveries } = await app.services.endpoints.recentDeliveries(live.id);
    return deliveries.find((d) => d.id === delivery_id && d.status !== 'pending');
  });
  t.match(recorded, {
    id: delivery_id,
    type: 'ping',
    status: 'succeeded',
    attempts: 1,
    last_response_code: 200,
    last_error: null,
  });
  t.match(await app.services.endpoints.show(a.id), {
    id: a.id,
    env: 'sandbox',
    active: true,
    last_error: null,
    last_failure_at: null,
  });
  t.equal(b.url, receiver.url('/b'));
});

t.test('delivered events match GET /api/v1/events', async (t) => {
  const res = await api(app, 'GET', '/api/v1/events?limit=100', sandbox);
  t.equal(res.status, 200);
  const listed = res.body.data as Json[];
  t.equal(listed.length, 8, 'the sandbox events of the app (the ping was live)');
  for (const e of listed) t.equal(e.id, e.event_id, 'in the list, id is the event id');
  const delivered = new Set(receiver.to('/a').map((r) => r.event!.event_id));
  t.strictSame(new Set(listed.map((e) => e.id)), delivered, 'the same event ids as delivered');
  const one = receiver.to('/a')[0]!.event!;
  const same = listed.find((e) => e.id === one.event_id);
  t.strictSame(
    { ...same, id: one.id },
    one,
    'the same body, except that a delivery has its own id',
  );
});
