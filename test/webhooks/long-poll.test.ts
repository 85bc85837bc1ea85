/**
 * GET /api/v1/events?wait= (long polling, OpenAPI listEvents), over real HTTP on a listening
 * server, on the test database (PGlite or PostgreSQL):
 * - a waiter is answered as soon as an event after its cursor commits, with that event, and
 *   read forward from its cursor (oldest first, limit, type);
 * - without an event it is answered after `wait` seconds with an empty page and its cursor;
 *   without a cursor it starts from now;
 * - the caps: 429 per credential, 503 per process, both with Retry-After; a client that goes
 *   away gives its place back;
 * - PostgreSQL only: an event recorded through another server process (a child process on the
 *   same database) wakes a waiter here within 1 s, and one recorded here wakes a waiter there;
 *   and a cursor never passes an event whose write is still open (a later event committed first
 *   is held back until the earlier one commits, then both come in order);
 * - graceful shutdown answers every waiter at once.
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { listingBody } from '../helpers/listings.ts';
import { startServerProcess } from '../helpers/private-servers.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';

const { app, localUrl } = await listeningApp(t, {
  WEBHOOK_WORKER: 'false',
  EVENTS_WAIT_MAX: '4',
  EVENTS_WAIT_MAX_PER_CREDENTIAL: '2',
});
const dev = await createDeveloper(app);
const key = await createKey(app, dev, 'sandbox');
const otherKey = await createKey(app, dev, 'sandbox');
const thirdKey = await createKey(app, dev, 'sandbox');

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Answer {
  status: number;
  headers: Headers;
  body: Json;
  /** ms epoch when the answer arrived. */
  at: number;
}

async function call(
  base: string,
  method: string,
  path: string,
  credential: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${credential}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: signal ?? AbortSignal.timeout(45_000),
  });
  return { status: res.status, headers: res.headers, body: await res.json(), at: Date.now() };
}

const events = (query: string, credential = key, signal?: AbortSignal, base = localUrl) =>
  call(base, 'GET', `/api/v1/events?${query}`, credential, undefined, signal);
const create = (base = localUrl, body: Json = {}) =>
  call(base, 'POST', '/api/v1/listings', key, listingBody(body));
const enc = encodeURIComponent;
/** Until this process has `n` requests waiting (EventWaiters.size). */
const waiting = (n: number) =>
  waitUntil(`${n} waiting`, () => app.services.events.waiters.size === n);

/** The cursor for "now", as a poller starts: `wait=0` without a cursor. */
async function now(credential = key, base = localUrl): Promise<string> {
  const res = await events('wait=0', credential, undefined, base);
  if (
    res.status !== 200 ||
    res.body.data.length !== 0 ||
    typeof res.body.meta.next_cursor !== 'string'
  )
    throw new Error(`wait=0: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.meta.next_cursor;
}

t.test('a waiter is answered as soon as an event after its cursor commits', async (t) => {
  const cursor = await now();
  const started = Date.now();
  const waiter = events(`wait=20&cursor=${enc(cursor)}`);
  await waiting(1);
  const created = await create();
  t.equal(created.status, 201);
  const answer = await waiter;
  t.equal(answer.status, 200);
  t.ok(answer.at - created.at < 1000, `answered ${answer.at - created.at} ms after the create`);
  t.ok(answer.at - started < 5000, 'well before the 20 s wait');
  t.strictSame(
    answer.body.data.map((e: Json) => [e.type, e.data.listing.id]),
    [['listing.created', created.body.data.id]],
    'with the event',
  );
  t.equal(
    answer.body.meta.next_cursor,
    answer.body.data[0].created_at,
    'next_cursor: its created_at',
  );

  // The next wait, from that cursor, gets the update and only it.
  const next = events(`wait=20&cursor=${enc(answer.body.meta.next_cursor)}`);
  await waiting(1);
  const patched = await call(localUrl, 'PATCH', `/api/v1/listings/${created.body.data.id}`, key, {
    title: 'Renamed while someone waits',
  });
  t.equal(patched.status, 200);
  const second = await next;
  t.ok(second.at - patched.at < 1000, `answered ${second.at - patched.at} ms after the update`);
  t.strictSame(
    second.body.data.map((e: Json) => e.type),
    ['listing.updated'],
  );
});

t.test('a forward page: after the cursor, oldest first, limit and type', async (t) => {
  const cursor = await now();
  const made: string[] = [];
  for (let i = 0; i < 3; i += 1) made.push((await create()).body.data.id);
  const first = await events(`wait=5&limit=2&cursor=${enc(cursor)}`);
  t.strictSame(
    first.body.data.map((e: Json) => e.data.listing.id),
    made.slice(0, 2),
    'the two oldest, oldest first',
  );
  const rest = await events(`wait=5&limit=2&cursor=${enc(first.body.meta.next_cursor)}`);
  t.strictSame(
    rest.body.data.map((e: Json) => e.data.listing.id),
    made.slice(2),
    'then the third',
  );
  // A wait for archives is not answered by creates and updates.
  const typed = events(`wait=20&type=listing.archived&cursor=${enc(cursor)}`);
  await waiting(1);
  await create();
  const archived = await call(localUrl, 'DELETE', `/api/v1/listings/${made[1]}`, key);
  t.equal(archived.status, 200);
  const answer = await typed;
  t.strictSame(
    answer.body.data.map((e: Json) => [e.type, e.data.listing.id]),
    [['listing.archived', made[1]]],
    'only the archive',
  );
  t.equal((await events('wait=31')).status, 400, 'wait is at most 30');
  t.equal((await events('wait=-1')).status, 400, 'and not negative');
});

t.test('without an event: an empty page with the same cursor after `wait`', async (t) => {
  const cursor = await now();
  const started = Date.now();
  const answer = await events(`wait=1&cursor=${enc(cursor)}`);
  const took = answer.at - started;
  t.equal(answer.status, 200);
  t.strictSame(answer.body.data, []);
  t.equal(answer.body.meta.next_cursor, cursor, 'the same cursor');
  t.ok(took >= 1000 && took < 3000, `answered after ${took} ms (wait=1)`);

  // Without a cursor the wait starts now: older events are not listed.
  await create();
  const fresh = await events('wait=1');
  t.strictSame(fresh.body.data, [], 'events recorded before the request are not listed');
  t.ok(fresh.body.meta.next_cursor > cursor, 'the cursor of "now" is later');
  // Another app's events (or the live environment's) do not answer a wait.
  const rival = await createDeveloper(app);
  const rivalKey = await createKey(app, rival, 'sandbox');
  const quiet = events(`wait=1&cursor=${enc(await now())}`);
  await call(localUrl, 'POST', '/api/v1/listings', rivalKey, listingBody());
  t.strictSame((await quiet).body.data, [], "another app's event does not answer");
});

t.test('caps: 429 per credential, 503 per process, with Retry-After', async (t) => {
  const cursor = await now();
  const abort = new AbortController();
  const held = [
    events(`wait=20&cursor=${enc(cursor)}`, key, abort.signal),
    events(`wait=20&cursor=${enc(cursor)}`, key, abort.signal),
  ];
  await waiting(2);
  const third = await events(`wait=20&cursor=${enc(cursor)}`, key);
  t.equal(third.status, 429, "the credential's third wait");
  t.equal(third.body.error.code, 'rate_limited');
  t.equal(third.headers.get('retry-after'), '5');
  t.equal((await events(`wait=0&cursor=${enc(cursor)}`, key)).status, 200, 'wait=0 never waits');

  held.push(
    events(`wait=20&cursor=${enc(cursor)}`, otherKey, abort.signal),
    events(`wait=20&cursor=${enc(cursor)}`, otherKey, abort.signal),
  );
  await waiting(4);
  const full = await events(`wait=20&cursor=${enc(cursor)}`, thirdKey);
  t.equal(full.status, 503, "the process's fifth wait (EVENTS_WAIT_MAX=4)");
  t.equal(full.body.error.code, 'service_unavailable');
  t.equal(full.headers.get('retry-after'), '5');

  // Clients that go away give their places back.
  abort.abort();
  await Promise.allSettled(held);
  await waiting(0);
  t.pass('no place held');
  const again = await events(`wait=0&cursor=${enc(cursor)}`, thirdKey);
  t.equal(again.status, 200);
});

const onPostgres = app.config.databaseUrl?.startsWith('postgres');
t.test(
  'an event recorded through another server process wakes a waiter within 1 s',
  {
    skip: onPostgres
      ? false
      : 'PGlite is single-process (one embedded database per process): the two-process wake-up ' +
        'runs on PostgreSQL (DATABASE_URL=postgres://...)',
  },
  async (t) => {
    const other = await startServerProcess(t, {
      DATABASE_URL: app.config.databaseUrl!,
      ...(app.config.databaseDirectUrl && { DATABASE_DIRECT_URL: app.config.databaseDirectUrl }),
      WEBHOOK_WORKER: 'false',
      LOG_LEVEL: 'warn',
    });
    // A waiter there, the event here.
    let cursor = await now(key, other.base);
    let waiter = events(`wait=20&cursor=${enc(cursor)}`, key, undefined, other.base);
    // Time is the subject here: the other process's waiters cannot be counted from this one, so
    // the request is given 500 ms to start waiting there (if it had not, its first read would
    // still find the event at once: the test could pass without a wake-up, never fail).
    await sleep(500);
    let created = await create(localUrl);
    let answer = await waiter;
    t.equal(answer.status, 200);
    t.ok(answer.at - created.at < 1000, `there: answered ${answer.at - created.at} ms after`);
    t.strictSame(
      answer.body.data.map((e: Json) => e.data.listing.id),
      [created.body.data.id],
    );
    // A waiter here, the event there.
    cursor = answer.body.meta.next_cursor;
    waiter = events(`wait=20&cursor=${enc(cursor)}`);
    await waiting(1);
    created = await create(other.base);
    t.equal(created.status, 201);
    answer = await waiter;
    t.ok(answer.at - created.at < 1000, `here: answered ${answer.at - created.at} ms after`);
    t.strictSame(
      answer.body.data.map((e: Json) => e.data.listing.id),
      [created.body.data.id],
    );
    other.child.kill('SIGTERM');
    await other.waitExit();
  },
);

t.test(
  'a cursor never passes an event whose write is still open',
  {
    skip: onPostgres
      ? false
      : 'PGlite runs one transaction at a time: no write can be open while another commits',
  },
  async (t) => {
    const cursor = await now();
    // A write that takes its event's created_at now and commits later (a slow transaction).
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    let recorded!: () => void;
    const isRecorded = new Promise<void>((resolve) => (recorded = resolve));
    const slow = app.db.transaction(async (tx) => {
      await new EventsRepository(tx).record(
        { appId: dev.appId, environment: 'sandbox', type: 'ping', data: { message: 'slow' } },
        tx,
      );
      recorded();
      await held;
    });
    await isRecorded;
    const waiter = events(`wait=20&cursor=${enc(cursor)}`);
    await waiting(1);
    // A later event commits first: the waiter must not be answered with it alone. Reads are
    // counted (EventsRepository.pageAfter) to know when one has run after that commit.
    let readsAfterCommit = 0;
    let committed = false;
    const pageAfter = EventsRepository.prototype.pageAfter;
    EventsRepository.prototype.pageAfter = async function (...args) {
      const startedAfter = committed;
      const page = await pageAfter.apply(this, args);
      if (startedAfter) readsAfterCommit += 1;
      return page;
    };
    t.teardown(() => void (EventsRepository.prototype.pageAfter = pageAfter));
    const created = await create();
    committed = true;
    t.equal(created.status, 201);
    await waitUntil('two reads after the later commit', () => readsAfterCommit >= 2);
    EventsRepository.prototype.pageAfter = pageAfter;
    t.equal(app.services.events.waiters.size, 1, 'still waiting while the earlier write is open');
    commit();
    await slow;
    const answer = await waiter;
    t.strictSame(
      answer.body.data.map((e: Json) => e.type),
      ['ping', 'listing.created'],
      'then both, in created_at order: the earlier one is not skipped',
    );
  },
);

// Last: it closes the app.
t.test('graceful shutdown answers every waiter at once', async (t) => {
  const cursor = await now();
  const waiters = [key, key, otherKey].map((credential) =>
    events(`wait=30&cursor=${enc(cursor)}`, credential),
  );
  await waiting(3);
  t.pass('three waiting');
  const closing = Date.now();
  const closed = app.close();
  const answers = await Promise.all(waiters);
  for (const answer of answers) {
    t.equal(answer.status, 200);
    t.strictSame(answer.body.data, []);
    t.equal(answer.body.meta.next_cursor, cursor, 'with its cursor, to send again');
    t.equal(answer.headers.get('connection'), 'close');
    t.ok(answer.at - closing < 1000, `answered ${answer.at - closing} ms after close began`);
  }
  await closed;
  t.ok(Date.now() - closing < 5000, 'and the app closed');
});
