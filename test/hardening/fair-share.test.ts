/**
 * A fair share under load (docs/operations.md "Fair share", the OpenAPI document's "Rate limits"
 * and listListings 503), on a real listening server:
 *
 * - the search gate: with SEARCH_CONCURRENCY searches running and SEARCH_QUEUE waiting, a read
 *   by id, plain feed pages, a write and health are answered at once, and one more search is
 *   answered 503 with Retry-After; a search that waits longer than SEARCH_QUEUE_WAIT_MS too; a
 *   search whose client left while it waited never runs;
 * - the cost-aware rate limit: a search charged N shows RateLimit-Remaining N lower, on its
 *   own answer and on the next request, through the same counters (Redis too, across two
 *   instances).
 *
 * Searches are held running by holding the read service's search call on a latch, inside the
 * gate: on PostgreSQL no lock holds a search without holding the feed and reads by id too (every
 * read of listings takes the same table's and its indexes' locks when it is planned, and an
 * ACCESS EXCLUSIVE lock on the table is what shutdown.test.ts uses to hold every request); on
 * PGlite one connection serves every statement. The gate runs before that call, so a held call
 * is a search holding its place; everything else in these requests is real.
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import t, { type Test } from 'tap';
import { ANONYMOUS } from '../../src/access.ts';
import { loadConfig } from '../../src/config.ts';
import { queryRows } from '../../src/db/rows.ts';
import { ResilientStore, type Counter } from '../../src/lib/rate-limit-store.ts';
import type { ListingPage } from '../../src/listings/listings-read-service.ts';
import { CHARGE_MAX, searchCharge } from '../../src/listings/search-charge.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { listingBody } from '../helpers/listings.ts';
import { METRICS_TOKEN, sampleValue, scrape } from '../helpers/metrics.ts';
import { privateServersMissing, startPrivateRedis } from '../helpers/private-servers.ts';
import { MISSING_PART } from '../helpers/system-parts.ts';
import { rateHeaders } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: any;
}

/**
 * A GET over a connection of its own from `from` (a loopback address: the whole 127.0.0.0/8
 * answers here), so that each test counts on a rate-limit counter of its own (per client IP).
 */
function get(base: string, path: string, from = '127.0.0.1'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${base}${path}`, { localAddress: from, agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode!,
          headers: response.headers as Record<string, string>,
          body: text ? JSON.parse(text) : null,
        }),
      );
    });
    request.on('error', reject);
  });
}

/** `count` live active listings of one new seller, straight into the database. */
async function seedListings(app: FastifyInstance, count: number): Promise<string[]> {
  const seller = await createDeveloper(app);
  const rows = await queryRows<{ id: string }>(
    app.db,
    sql`
    insert into listings (seller_id, environment, status, title, description, category,
      price_cents, published_at)
    select ${seller.userId}::uuid, 'live', 'active', 'Wool coat ' || i, 'Warm and plain',
      'Outerwear', 1000 + i, now() - interval '1 day' + i * interval '1 millisecond'
    from generate_series(1, ${count}::int) as i
    returning id`,
  );
  return rows.map((row) => row.id);
}

/**
 * Holds every search (a page with `q`) of the read service until released: each waits inside
 * the gate, holding its place, as a slow search does.
 */
function holdSearches(t: Test, app: FastifyInstance) {
  const reads = app.services.listingReads;
  const list = reads.list.bind(reads);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let entered = 0;
  reads.list = async (caller, query) => {
    if (query.q !== undefined) {
      entered += 1;
      await released;
    }
    return list(caller, query);
  };
  t.teardown(() => {
    release();
    reads.list = list;
  });
  return { release, entered: () => entered };
}

/** A request's promise, and whether it has been answered yet. */
function pending<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { promise, settled: () => settled };
}

t.test('the charge of a page', async (t) => {
  t.equal(searchCharge(undefined), 1, 'the plain feed (no rows reported): 1');
  t.equal(searchCharge(0), 1);
  t.equal(searchCharge(999), 1, 'under 1,000 rows: 1');
  t.equal(searchCharge(1000), 2, '1 more per full 1,000 rows');
  t.equal(searchCharge(5001), 6);
  t.equal(searchCharge(9000), CHARGE_MAX);
  t.equal(searchCharge(10_000_000), CHARGE_MAX, 'at most CHARGE_MAX');
});

t.test('the gate settings are checked at boot, one line naming the variable', async (t) => {
  const bad: Record<string, string>[] = [
    { SEARCH_CONCURRENCY: '0' },
    { SEARCH_CONCURRENCY: '10' },
    { SEARCH_CONCURRENCY: 'four' },
    { SEARCH_QUEUE: '-1' },
    { SEARCH_QUEUE_WAIT_MS: '0' },
    { SEARCH_QUEUE_WAIT_MS: '1.5' },
  ];
  for (const env of bad) {
    const [name] = Object.keys(env);
    t.throws(
      () => loadConfig({ NODE_ENV: 'test', ...env }),
      { name: 'ConfigError', message: new RegExp(`^${name} must be [^\\n]+$`) },
      `${name}=${env[name!]}`,
    );
  }
  const config = loadConfig({ NODE_ENV: 'test' });
  t.same(
    [config.searchConcurrency, config.searchQueue, config.searchQueueWaitMs],
    [4, 16, 1000],
    'defaults',
  );
  t.equal(loadConfig({ NODE_ENV: 'test', SEARCH_QUEUE: '0' }).searchQueue, 0, 'no queue');
});

t.test('the search gate', async (t) => {
  const { app, localUrl: base } = await listeningApp(t, {
    SEARCH_CONCURRENCY: '1',
    SEARCH_QUEUE: '2',
    SEARCH_QUEUE_WAIT_MS: '60000',
    METRICS_TOKEN,
  });
  const [id] = await seedListings(app, 30);
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');

  t.test('searches beyond it wait or are shed; nothing else waits', async (t) => {
    const held = holdSearches(t, app);
    const running = pending(get(base, '/api/v1/listings?q=coat'));
    await waitUntil('the first search to hold its place', () => app.searchGate.running === 1);
    const queued = [
      pending(get(base, '/api/v1/listings?q=wool&sort=price_asc')),
      pending(get(base, '/api/v1/listings?q=warm&seller=nobody_here')),
    ];
    await waitUntil('two searches to wait', () => app.searchGate.queued === 2);
    t.equal(held.entered(), 1, 'one search runs; the others wait at the gate');

    const shed = await get(base, '/api/v1/listings?category=Outerwear');
    t.equal(shed.status, 503, 'a search beyond the queue is shed at once');
    t.equal(shed.body.error.code, 'service_unavailable');
    t.equal(shed.headers['retry-after'], '1', 'with Retry-After');
    t.ok(shed.headers['ratelimit-remaining'], 'and its RateLimit headers');
    t.equal(app.searchGate.shed.queue_full, 1);

    const byId = await get(base, `/api/v1/listings/${id}`);
    t.equal(byId.status, 200, 'a read by id is answered while the gate is full');
    const feed = await get(base, '/api/v1/listings?limit=5');
    t.equal(feed.status, 200, 'a plain feed page too');
    t.equal(feed.body.data.length, 5);
    const cursor = encodeURIComponent(feed.body.meta.next_cursor);
    const next = await get(base, `/api/v1/listings?limit=5&sort=newest&cursor=${cursor}`);
    t.equal(next.status, 200, 'and its next page (sort=newest is the feed)');
    const created = await fetch(`${base}/api/v1/listings`, {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify(listingBody()),
    });
    t.equal(created.status, 201, 'a write too');
    t.equal((await get(base, '/api/v1/health')).status, 200, 'and health');
    t.notOk(
      running.settled() || queued.some((each) => each.settled()),
      'all while the searches are still held',
    );

    const metrics = await scrapeIfParser(t, base);
    if (metrics) {
      t.equal(sampleValue(metrics, 'search_requests_running'), 1, 'metrics: running');
      t.equal(sampleValue(metrics, 'search_requests_queued'), 2, 'metrics: queued');
      t.equal(
        sampleValue(metrics, 'search_requests_shed_total', { reason: 'queue_full' }),
        1,
        'metrics: shed',
      );
    }

    held.release();
    t.equal((await running.promise).status, 200, 'the running search is answered');
    for (const each of queued) t.equal((await each.promise).status, 200, 'then those that waited');
    t.equal(held.entered(), 3);
    t.same([app.searchGate.running, app.searchGate.queued], [0, 0], 'every place is free again');
  });

  t.test('a search whose client left while it waited gives its place on unrun', async (t) => {
    const held = holdSearches(t, app);
    const running = pending(get(base, '/api/v1/listings?q=coat'));
    await waitUntil('the first search to hold its place', () => app.searchGate.running === 1);
    const gone = http.get(`${base}/api/v1/listings?q=wool`);
    gone.on('error', () => {});
    await waitUntil('the second search to wait', () => app.searchGate.queued === 1);
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))),
      );
    const open = await connections();
    gone.destroy();
    await waitUntil('the server to see it leave', async () => (await connections()) < open);
    const third = pending(get(base, '/api/v1/listings?q=plain'));
    await waitUntil('the third search to wait', () => app.searchGate.queued === 2);
    held.release();
    t.equal((await running.promise).status, 200);
    t.equal((await third.promise).status, 200, 'the next waiting search runs');
    t.equal(held.entered(), 2, 'the abandoned one did not');
    t.same([app.searchGate.running, app.searchGate.queued], [0, 0]);
  });
});

const redisMissing = privateServersMissing();

t.test('the charge in memory, on the limiter counter', async (t) => {
  const root = new ResilientStore(null);
  const store = root.child({ groupId: 'api' });
  t.equal(root.child({ groupId: 'api' }), store, "one policy's store, whoever asks");
  const counted = await new Promise<Counter>((resolve) =>
    store.incr('ip:x', (_err, result) => resolve(result!), 60_000),
  );
  t.equal(counted.current, 1);
  const charged = await store.incrBy('ip:x', 4, 60_000);
  t.equal(charged.current, 5, 'four more on the same counter');
  t.ok(charged.ttl > 0 && charged.ttl <= 60_000, 'in the same window');
  const fresh = await store.incrBy('ip:y', 3, 60_000);
  t.equal(fresh.current, 3, 'a new counter starts at the charge');
  t.ok(fresh.ttl > 59_000 && fresh.ttl <= 60_000, 'and a window of its own');
});

t.test('one server: the queue wait, and the cost-aware rate limit', async (t) => {
  // With a private Redis the counters are there (and a second instance reads them); else in
  // memory. Each subtest is a client of its own (a loopback address), with its own counter.
  const redis = redisMissing ? null : await startPrivateRedis(t);
  const env = {
    SEARCH_CONCURRENCY: '1',
    SEARCH_QUEUE: '4',
    SEARCH_QUEUE_WAIT_MS: '200',
    RATE_LIMIT_MAX: '12',
    RATE_LIMIT_WINDOW_MS: '600000',
    ...(redis ? { REDIS_URL: redis.url } : {}),
  };
  const { app, localUrl: base } = await listeningApp(t, env);
  // More than 1,000 rows for a word none of them has: a keyword search walks them all.
  await seedListings(app, 1200);

  t.test('a search that waits longer than SEARCH_QUEUE_WAIT_MS is answered 503', async (t) => {
    const from = '127.0.0.5';
    const held = holdSearches(t, app);
    const running = pending(get(base, '/api/v1/listings?q=coat', from));
    await waitUntil('the first search to hold its place', () => app.searchGate.running === 1);
    const started = Date.now();
    const waited = await get(base, '/api/v1/listings?q=wool', from);
    t.equal(waited.status, 503);
    t.equal(waited.body.error.code, 'service_unavailable');
    t.equal(waited.headers['retry-after'], '1');
    t.ok(Date.now() - started >= 200, 'after its wait, not before');
    t.equal(app.searchGate.shed.wait_timeout, 1);
    t.equal(app.searchGate.queued, 0, 'it left the queue');
    t.notOk(running.settled());
    held.release();
    t.equal((await running.promise).status, 200);
    t.equal(held.entered(), 1, 'the search that timed out never ran');
  });

  t.test('a search is charged by the rows it read, on its own headers', async (t) => {
    const from = '127.0.0.2';
    const rowsRead = (await app.services.listingReads.list(ANONYMOUS, { q: 'tuxedo' })).rowsRead;
    const expected = searchCharge(rowsRead);
    const before = rateHeaders((await get(base, '/api/v1/listings?limit=1', from)).headers);
    const searched = await get(base, '/api/v1/listings?q=tuxedo', from);
    t.equal(searched.status, 200);
    const after = rateHeaders(searched.headers);
    t.equal(
      before.remaining! - after.remaining!,
      expected,
      `charged ${expected} (${rowsRead} rows)`,
    );
    t.ok(expected > 1, `a search of over 1,000 rows costs more than a feed page (${rowsRead})`);
    const next = rateHeaders((await get(base, '/api/v1/health', from)).headers);
    t.equal(next.remaining, Math.max(0, after.remaining! - 1), 'the charge stays on the counter');
  });

  t.test('the charge on the headers, and the limit it brings closer', async (t) => {
    // A count of rows no search of this database reads (while rowsRead is not reported, none
    // does): the header path and the counter, on the real service's page.
    const from = '127.0.0.3';
    reportRowsRead(t, app, 4500);
    const first = await get(base, '/api/v1/listings?q=coat', from);
    t.equal(first.status, 200);
    t.same(
      [rateHeaders(first.headers).limit, rateHeaders(first.headers).remaining],
      [12, 12 - 5],
      '4,500 rows: charged 5 (1 on arrival, 4 after the work)',
    );
    t.ok(rateHeaders(first.headers).reset! > 0, 'RateLimit-Reset of the same window');
    const second = await get(base, '/api/v1/listings?q=coat', from);
    t.equal(rateHeaders(second.headers).remaining, 2, 'another 5');
    const third = await get(base, '/api/v1/listings?q=coat', from);
    t.equal(third.status, 200, 'a search within the limit is answered (its work is done)');
    t.equal(rateHeaders(third.headers).remaining, 0, 'and charged past it: no negative remaining');
    const refused = await get(base, '/api/v1/listings?limit=1', from);
    t.equal(refused.status, 429, 'the next request is refused');
    t.ok(rateHeaders(refused.headers).retryAfter! > 0);
    const elsewhere = await get(base, '/api/v1/listings?limit=1', '127.0.0.4');
    t.equal(rateHeaders(elsewhere.headers).remaining, 11, 'another client is not charged');
  });

  t.test(
    'the charge is shared by instances through Redis',
    { skip: redisMissing ?? false },
    async (t) => {
      const from = '127.0.0.6';
      const two = await listeningApp(t, env);
      reportRowsRead(t, app, 3000);
      const searched = await get(base, '/api/v1/listings?q=coat', from);
      t.equal(searched.status, 200);
      t.equal(rateHeaders(searched.headers).remaining, 12 - 4, 'charged 4 on the first instance');
      const other = await get(two.localUrl, '/api/v1/health', from);
      t.equal(
        rateHeaders(other.headers).remaining,
        12 - 5,
        'the second instance counts on from it',
      );
    },
  );
});

/** Makes every search page report `rowsRead` rows read (its rows are the real service's). */
function reportRowsRead(t: Test, app: FastifyInstance, rowsRead: number): void {
  const reads = app.services.listingReads;
  const list = reads.list.bind(reads);
  reads.list = async (caller, query): Promise<ListingPage> => {
    const page = await list(caller, query);
    return query.q === undefined ? page : Object.assign(page, { rowsRead });
  };
  t.teardown(() => {
    reads.list = list;
  });
}

/** GET /metrics read by the Prometheus parser, or null (a visible skip) where it is missing. */
async function scrapeIfParser(t: Test, base: string) {
  const found = spawnSync('/usr/bin/python3', ['-c', 'import prometheus_client.parser'], {
    stdio: 'ignore',
  });
  if (found.status !== 0) {
    const missing = `${MISSING_PART}: Python's Prometheus parser (apt-get install python3-prometheus-client)`;
    if (process.env.CI) throw new Error(missing);
    t.pass('metrics not read', { skip: missing });
    return null;
  }
  return scrape(async (headers) => {
    const response = await fetch(`${base}/metrics`, { headers });
    return { status: response.status, body: await response.text() };
  });
}
