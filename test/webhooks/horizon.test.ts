/**
 * The events' visibility horizon (EventsRepository.horizon, OpenAPI listEvents "Order and
 * delivery"): only a transaction that writes events holds back the events that others committed
 * from GET /api/v1/events read forward and its long polls. On PostgreSQL, directly and through
 * PgBouncer (.ci/run's pooler leg runs test/webhooks/): another session keeps a transaction open
 * that writes nothing (an operator's psql, a pg_dump, a long report) and an app's event still
 * reaches its waiting long poll at once; a session that has locked webhook_events as a writer
 * does (its events could still commit before those listed), until it ends.
 */
import postgres from 'postgres';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';

const { app, localUrl } = await listeningApp(t, { WEBHOOK_WORKER: 'false' });
const onPostgres = app.config.databaseUrl?.startsWith('postgres');
if (!onPostgres)
  t.test(
    'PostgreSQL only',
    { skip: 'PGlite runs one transaction at a time: no other session can hold one open' },
    () => {},
  );
else {
  const dev = await createDeveloper(app);
  const key = await createKey(app, dev, 'sandbox');
  // Another session on the same database, as an operator's shell would be (through the pooler
  // in that leg: a transaction keeps its server connection there as well).
  const other = postgres(app.config.databaseUrl!, { max: 1, onnotice: () => {} });
  t.teardown(() => other.end({ timeout: 1 }));

  type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${localUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, body: (await res.json()) as Json, at: Date.now() };
  };
  const forward = (cursor: string, wait: number) =>
    call('GET', `/api/v1/events?wait=${wait}&cursor=${encodeURIComponent(cursor)}`);
  const now = async () => (await call('GET', '/api/v1/events?wait=0')).body.meta.next_cursor;
  const create = () => call('POST', '/api/v1/listings', listingBody({}));

  t.test('a transaction open elsewhere that writes no events holds nothing back', async (t) => {
    const session = await other.reserve();
    t.teardown(() => session.release());
    await session`begin`;
    await session`select txid_current()`; // a transaction id of its own, as a writer has
    const cursor = await now();
    const waiter = forward(cursor, 20);
    await waitUntil('one waiting', () => app.services.events.waiters.size === 1);
    const created = await create();
    t.equal(created.status, 201);
    const answer = await waiter;
    t.strictSame(
      answer.body.data.map((e: Json) => [e.type, e.data.listing.id]),
      [['listing.created', created.body.data.id]],
      'the waiter gets the event while the other transaction is still open',
    );
    t.ok(answer.at - created.at < 1000, `answered ${answer.at - created.at} ms after the create`);
    await session`rollback`;
  });

  t.test(
    'a transaction that holds webhook_events as a writer holds later events back',
    async (t) => {
      const session = await other.reserve();
      t.teardown(() => session.release());
      const cursor = await now();
      await session`begin`;
      // What a statement that records events takes first (and keeps until its transaction ends).
      await session`lock table webhook_events in row exclusive mode`;
      const created = await create();
      t.equal(created.status, 201);
      const held = await forward(cursor, 0);
      t.strictSame(held.body.data, [], 'not listed while a writer that started earlier is open');
      t.equal(held.body.meta.next_cursor, cursor, 'and the cursor does not pass it');
      await session`rollback`;
      const after = await forward(cursor, 0);
      t.strictSame(
        after.body.data.map((e: Json) => e.data.listing.id),
        [created.body.data.id],
        'listed once the writer ended',
      );
    },
  );
}
