/**
 * Creates whose changes are recorded inside the insert statement itself
 * (src/listings/listing-changes.ts, the path `npm run bench` measures): no transaction is
 * opened, the event's listing is the API's answer field for field and in the same order, the
 * webhook body is compact JSON, a batch of new listings is one statement, and concurrent creates
 * each get their own event. The first sandbox create of an app writes its go-live milestone in
 * the same statement; an upsert is a lookup and one update statement that records its event
 * itself (test/listings/single-statement.test.ts counts every write's).
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
await createEndpoint(app, receiver, { appId: dev.appId, path: '/in-statement' });

/**
 * Counts the transactions opened on the database (the statement path opens none). The delivery
 * worker's claims and the saved searches' matcher's passes open their own, so both are paused
 * while a request is counted, and started again after it.
 */
let transactions = 0;
const transaction = app.db.transaction.bind(app.db);
app.db.transaction = ((work: Parameters<typeof transaction>[0]) => {
  transactions += 1;
  return transaction(work);
}) as typeof transaction;

/** The request's answer and how many transactions it opened. */
async function counted<T>(request: () => Promise<T>): Promise<{ answer: T; opened: number }> {
  const [worker, matcher] = [app.webhookWorker!, app.services.matcher!];
  await Promise.all([worker.stop(), matcher.stop()]);
  try {
    const before = transactions;
    const answer = await request();
    return { answer, opened: transactions - before };
  } finally {
    worker.start();
    matcher.start();
  }
}

async function eventsOf(
  listingId: string,
): Promise<{ type: string; data: string; created_at: string }[]> {
  return queryRows(
    app.db,
    sql`select type, data, created_at::text as created_at from webhook_events
        where (data::json -> 'listing' ->> 'id') = ${listingId} order by created_at`,
  );
}

/** The delivered body of the event about `listingId`. */
async function delivered(listingId: string) {
  return waitUntil(`the delivery about ${listingId}`, () =>
    receiver
      .to('/in-statement')
      .find((r) => r.event && (r.event.data as Json).listing?.id === listingId),
  );
}

t.test(
  'the first sandbox create is one statement too, and its milestone goes with it',
  async (t) => {
    const { answer: res, opened } = await counted(() =>
      api(app, 'POST', '/api/v1/listings', sandbox, listingBody()),
    );
    t.equal(res.status, 201);
    t.equal(opened, 0, 'no transaction opened');
    const [milestone] = await queryRows<{ count: number }>(
      app.db,
      sql`select count(*)::int as count from app_milestones where app_id = ${dev.appId} and name = 'sandbox_listing'`,
    );
    t.equal(milestone?.count, 1, 'the sandbox_listing milestone is recorded');
  },
);

t.test(
  'later creates: one statement, the event is the answer, the body compact JSON',
  async (t) => {
    const { answer: res, opened } = await counted(() =>
      app.inject({
        method: 'POST',
        url: '/api/v1/listings',
        headers: { authorization: `Bearer ${sandbox}`, 'content-type': 'application/json' },
        payload: JSON.stringify(
          listingBody({
            description: 'Quote " and unicode é ✓',
            tags: ['a', 'b'],
            image_urls: ['https://img.example.com/1.jpg'],
          }),
        ),
      }),
    );
    t.equal(res.statusCode, 201);
    t.equal(opened, 0, 'no transaction opened');
    const listing = JSON.parse(res.body).data;

    const events = await eventsOf(listing.id);
    t.equal(events.length, 1, 'one event recorded');
    t.equal(events[0]!.type, 'listing.created');
    t.equal(
      JSON.stringify(JSON.parse(events[0]!.data).listing),
      JSON.stringify(listing),
      'same fields, same values, same order as the answer',
    );

    const got = await delivered(listing.id);
    t.equal(got.verifyError, null, 'the signatures verify');
    const raw = got.raw.toString('utf8');
    t.equal(raw, JSON.stringify(JSON.parse(raw)), 'the body is compact JSON');
    t.equal(
      JSON.stringify((got.event!.data as Json).listing),
      JSON.stringify(listing),
      'the delivered listing is the answer',
    );
  },
);

t.test(
  'a batch of new listings is one statement with one event per item, in index order',
  async (t) => {
    const items = [listingBody(), { title: '' }, listingBody(), listingBody()];
    const { answer: res, opened } = await counted(() =>
      api(app, 'POST', '/api/v1/listings/batch', sandbox, { items }),
    );
    t.equal(res.status, 200);
    t.equal(opened, 0, 'no transaction opened');
    t.strictSame(
      res.body.data.results.map((r: Json) => [r.index, r.ok, r.status]),
      [
        [0, true, 201],
        [1, false, 400],
        [2, true, 201],
        [3, true, 201],
      ],
    );
    t.match(res.body.meta, { created: 3, updated: 0, failed: 1 });
    const created = res.body.data.results.filter((r: Json) => r.ok).map((r: Json) => r.data);
    const times: string[] = [];
    for (const listing of created) {
      const events = await eventsOf(listing.id);
      t.equal(events.length, 1, `one event for item ${listing.title}`);
      t.equal(
        JSON.stringify(JSON.parse(events[0]!.data).listing),
        JSON.stringify(listing),
        "the event is the item's answer",
      );
      times.push(events[0]!.created_at);
    }
    t.strictSame([...times].sort(), times, 'events in index order');
    const published = created.map((l: Json) => l.published_at);
    t.strictSame([...published].sort(), published, 'published in index order');
  },
);

t.test('concurrent creates each commit with their own event', async (t) => {
  const results = await Promise.all(
    Array.from({ length: 12 }, () => api(app, 'POST', '/api/v1/listings', sandbox, listingBody())),
  );
  t.strictSame(
    results.map((r) => r.status),
    Array(12).fill(201),
    'every create answered 201',
  );
  for (const { body } of results) {
    const events = await eventsOf(body.data.id);
    t.equal(events.length, 1);
    t.equal(JSON.parse(events[0]!.data).listing.published_at, body.data.published_at);
  }
});

t.test('a create that upserts (known external_id) records its event in the update', async (t) => {
  const first = await api(
    app,
    'POST',
    '/api/v1/listings',
    sandbox,
    listingBody({ external_id: 'upsert-me' }),
  );
  t.equal(first.status, 201);
  const { answer: again, opened } = await counted(() =>
    api(
      app,
      'POST',
      '/api/v1/listings',
      sandbox,
      listingBody({ external_id: 'upsert-me', title: 'Upserted' }),
    ),
  );
  t.equal(again.status, 200);
  t.equal(again.body.data.id, first.body.data.id, 'the same listing');
  t.equal(opened, 0, 'no transaction for the upsert');
  const events = await eventsOf(first.body.data.id);
  t.strictSame(
    events.map((e) => e.type),
    ['listing.created', 'listing.updated'],
  );
  t.equal(JSON.parse(events[1]!.data).listing.title, 'Upserted');
});
