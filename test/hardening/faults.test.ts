/**
 * Backing services failing under load (503 service_unavailable in the OpenAPI "Errors", rate
 * limits, docs/operations.md "Faults", the getHealth operation). A private PostgreSQL cluster and a
 * private redis-server (never the shared ones) are stopped and started while a bounded load runs
 * over loopback HTTP against the app listening in this process. Every response is counted:
 *
 * - PostgreSQL down: every request answers 503 service_unavailable with Retry-After (reads,
 *   writes, health ?db=1), never another 5xx; back up: the same process serves again.
 * - Redis down: nothing changes for clients (memory counters), the headers stay; logged once.
 * - PostgreSQL crashes (immediate stop, WAL recovery) while Redis is down too: same answers.
 * - Afterwards every acknowledged write (201/200) is in the database, with its id.
 */
import postgres from 'postgres';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import {
  withPrivateServers,
  type PrivatePostgres,
  type PrivateRedis,
} from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';
import { METRICS_TOKEN, requirePrometheusParser, sampleValue, scrape } from '../helpers/metrics.ts';
import { buildLoggedApp } from './support.ts';

requirePrometheusParser(t);

await withPrivateServers(
  t,
  'faults against a private PostgreSQL and Redis',
  { redis: true },
  faults,
);

type Op = 'write' | 'list' | 'read' | 'health';

interface Outcome {
  op: Op;
  status: number; // 0: no HTTP answer (connection error or timeout)
  startedAt: number;
  endedAt: number;
  code?: string | undefined;
  retryAfter: string | null;
  rateLimited: boolean;
}

async function faults(pg: PrivatePostgres, redis: PrivateRedis): Promise<void> {
  const { app, logs, text } = await buildLoggedApp(t, {
    DATABASE_URL: pg.url,
    REDIS_URL: redis.url,
    // The load is not about limits: a high ceiling, still counted (in Redis, then memory).
    RATE_LIMIT_MAX: '1000000',
    // The operator's view of the same faults (docs/metrics.md).
    METRICS_TOKEN,
  });
  const metrics = () =>
    scrape(async (headers) => {
      const answer = await app.inject({ url: '/metrics', headers });
      return { status: answer.statusCode, body: answer.body };
    });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');

  /** external_id -> listing id of every write the service acknowledged. */
  const acknowledged = new Map<string, string>();
  const outcomes: Outcome[] = [];
  let serial = 0;

  async function one(op: Op): Promise<void> {
    const startedAt = Date.now();
    let url = `${base}/api/v1/listings`;
    const init: RequestInit = {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(15_000),
    };
    const externalId = `fault-${(serial += 1)}`;
    if (op === 'write') {
      init.method = 'POST';
      init.headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      init.body = JSON.stringify({
        title: `Fault test ${externalId}`,
        price_cents: 1000 + serial,
        external_id: externalId,
      });
    } else if (op === 'read' && acknowledged.size > 0) {
      const ids = [...acknowledged.values()];
      url = `${base}/api/v1/listings/${ids[serial % ids.length]}`;
    } else if (op === 'list' || op === 'read') {
      url = `${base}/api/v1/listings?limit=5`;
    } else {
      url = `${base}/api/v1/health?db=1`;
      init.headers = {};
    }
    try {
      const res = await fetch(url, init);
      const body = (await res.json()) as { data?: { id?: string }; error?: { code?: string } };
      if (op === 'write' && (res.status === 201 || res.status === 200) && body.data?.id)
        acknowledged.set(externalId, body.data.id);
      outcomes.push({
        op,
        status: res.status,
        startedAt,
        endedAt: Date.now(),
        code: body.error?.code,
        retryAfter: res.headers.get('retry-after'),
        rateLimited: res.headers.get('ratelimit-limit') !== null,
      });
    } catch {
      outcomes.push({
        op,
        status: 0,
        startedAt,
        endedAt: Date.now(),
        retryAfter: null,
        rateLimited: false,
      });
    }
  }

  const OPS: Op[] = ['write', 'list', 'write', 'read', 'health'];
  /**
   * Bounded load: `workers` concurrent loops until `until` (ms, or a promise: the end of the
   * phase it measures, so a slow machine's load lasts as long as the phase) or until
   * `maxRequests` were sent.
   */
  async function load(
    until: number | Promise<unknown>,
    maxRequests = 1500,
    workers = 6,
  ): Promise<Outcome[]> {
    const from = outcomes.length;
    let over = false;
    const timer = typeof until === 'number' ? setTimeout(() => (over = true), until) : undefined;
    if (typeof until !== 'number') void until.then(() => (over = true));
    let sent = 0;
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        for (let i = w; !over && sent < maxRequests; i += workers) {
          sent += 1;
          await one(OPS[i % OPS.length]!);
        }
      }),
    );
    clearTimeout(timer);
    return outcomes.slice(from);
  }

  /** The end of a phase, to run a load until (load). */
  function phaseEnd(): { ended: Promise<void>; end(): void } {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    return { ended, end };
  }

  const byStatus = (list: Outcome[]) => {
    const counts: Record<string, number> = {};
    for (const o of list) counts[o.status] = (counts[o.status] ?? 0) + 1;
    return counts;
  };
  /** Until `n` responses to requests started at or after `since` have come back. */
  const answeredSince = (what: string, since: number, n: number, ops: readonly Op[] = []) =>
    waitUntil(
      what,
      () => {
        const since_ = outcomes.filter((o) => o.startedAt >= since);
        return since_.length >= n && ops.every((op) => since_.some((o) => o.op === op));
      },
      { timeoutMs: 20_000 },
    );
  const bad = (list: Outcome[]) =>
    list.filter((o) => o.status === 0 || (o.status >= 500 && o.status !== 503));

  t.test('all up: the load succeeds', async (t) => {
    const phase = await load(2000);
    t.comment(`up: ${phase.length} responses ${JSON.stringify(byStatus(phase))}`);
    t.ok(phase.length >= 10, 'a real load (its size depends on the machine)');
    t.same(
      phase.filter((o) => o.status >= 400),
      [],
      'no errors',
    );
    t.ok(
      phase.every((o) => o.rateLimited),
      'RateLimit headers on every response',
    );
  });

  t.test('PostgreSQL stops and starts during the load', async (t) => {
    const workerEvents = (event: string) => logs().filter((l) => l.event === event).length;
    const [downBefore, upBefore] = [
      workerEvents('webhook_worker_down'),
      workerEvents('webhook_worker_up'),
    ];
    const before = await metrics();
    const measured = phaseEnd();
    const during = load(measured.ended, 20_000);
    await answeredSince('the load under way', Date.now(), 10);
    await pg.stop('fast');
    const downAt = Date.now();
    // The outage lasts until it has been seen: requests of every kind answered inside it, and a
    // failing pass of the webhook worker.
    await answeredSince('requests of every kind during the outage', downAt, 20, [
      'write',
      'list',
      'read',
      'health',
    ]);
    await waitUntil(
      'the worker to see the outage',
      () => workerEvents('webhook_worker_down') > downBefore,
    );
    const upAt = Date.now();
    await pg.start();
    measured.end();
    const phase = await during;

    const outage = phase.filter((o) => o.startedAt >= downAt && o.endedAt <= upAt);
    t.comment(
      `PostgreSQL outage (fast stop): ${phase.length} responses in the phase ${JSON.stringify(byStatus(phase))}; strictly inside the outage ${outage.length} ${JSON.stringify(byStatus(outage))}`,
    );
    t.same(bad(phase), [], 'no 5xx other than 503, no connection errors');
    t.ok(outage.length >= 10, 'requests were made during the outage');
    t.ok(
      outage.every(
        (o) => o.status === 503 && o.code === 'service_unavailable' && o.retryAfter !== null,
      ),
      'every request during the outage: 503 service_unavailable with Retry-After',
    );
    for (const op of ['write', 'list', 'read', 'health'] as const) {
      t.ok(
        outage.some((o) => o.op === op),
        `${op} requests during the outage`,
      );
    }
    t.ok(
      phase.every((o) => o.rateLimited),
      'RateLimit headers on every response, 503s included',
    );
    const duringOutage = await metrics();
    const moved = (name: string, labels: Record<string, string> = {}) =>
      sampleValue(duringOutage, name, labels) - sampleValue(before, name, labels);
    const unavailable = phase.filter((o) => o.status === 503 && o.op !== 'health').length;
    t.ok(
      moved('db_unavailable_responses_total') >= unavailable,
      `db_unavailable_responses_total moved by every 503 of the API (${unavailable})`,
    );
    t.ok(
      moved('http_requests_total', { operation: 'createListing', status_class: '5xx' }) > 0,
      'http_requests_total counts the 503s of createListing as 5xx',
    );
    t.ok(moved('db_query_errors_total') > 0, 'db_query_errors_total moved');

    await waitUntil(
      'the service to answer health ?db=1 again',
      async () => (await fetch(`${base}/api/v1/health?db=1`)).status === 200,
      { timeoutMs: 20_000, everyMs: 200 },
    );
    const after = await load(1500);
    t.comment(
      `after PostgreSQL returned: ${after.length} responses ${JSON.stringify(byStatus(after))}`,
    );
    t.same(
      after.filter((o) => o.status >= 400),
      [],
      'recovered without a restart: every request succeeds',
    );

    // The webhook worker polls every second through the outage: one line when its passes start
    // failing, one when they work again, not one per poll.
    await waitUntil(
      'the webhook worker to log its recovery',
      () => workerEvents('webhook_worker_up') > upBefore,
      { timeoutMs: 10_000, everyMs: 100 },
    );
    t.equal(workerEvents('webhook_worker_down') - downBefore, 1, 'the worker logs the outage once');
    t.equal(workerEvents('webhook_worker_up') - upBefore, 1, 'and its end once');
  });

  t.test('Redis stops and starts during the load', async (t) => {
    const downLogsBefore = logs().filter((l) => l.event === 'rate_limit_redis_down').length;
    const measured = phaseEnd();
    const during = load(measured.ended, 20_000);
    await answeredSince('the load under way', Date.now(), 10);
    t.equal(
      sampleValue(await metrics(), 'rate_limit_redis_fallback'),
      0,
      'rate_limit_redis_fallback is 0 while Redis works',
    );
    await redis.stop('SIGKILL');
    await waitUntil('the limiter to fall back', () => app.redis?.degraded === true, {
      timeoutMs: 5000,
    });
    t.equal(
      sampleValue(await metrics(), 'rate_limit_redis_fallback'),
      1,
      'rate_limit_redis_fallback is 1 while the counters are in memory',
    );
    await answeredSince('requests while the counters are in memory', Date.now(), 20);
    await redis.start();
    measured.end();
    const phase = await during;
    t.comment(`Redis outage: ${phase.length} responses ${JSON.stringify(byStatus(phase))}`);
    t.same(
      phase.filter((o) => o.status >= 400),
      [],
      'clients see no difference: no error at all',
    );
    t.ok(
      phase.every((o) => o.rateLimited),
      'RateLimit headers on every response',
    );
    t.equal(
      logs().filter((l) => l.event === 'rate_limit_redis_down').length - downLogsBefore,
      1,
      'the fallback is logged once',
    );
    await waitUntil('the limiter to use Redis again', () => app.redis?.degraded === false, {
      timeoutMs: 15_000,
    });
    t.ok(
      logs().some((l) => l.event === 'rate_limit_redis_up'),
      'the way back is logged',
    );
    t.equal(
      sampleValue(await metrics(), 'rate_limit_redis_fallback'),
      0,
      'and rate_limit_redis_fallback returns to 0',
    );
  });

  t.test('PostgreSQL crashes while Redis is down too, then both return', async (t) => {
    const measured = phaseEnd();
    const during = load(measured.ended, 20_000);
    await answeredSince('the load under way', Date.now(), 10);
    await redis.stop('SIGKILL');
    await pg.stop('immediate');
    const downAt = Date.now();
    await answeredSince('requests during the outage', downAt, 20);
    const upAt = Date.now();
    await Promise.all([pg.start(), redis.start()]);
    measured.end();
    const phase = await during;
    const outage = phase.filter((o) => o.startedAt >= downAt && o.endedAt <= upAt);
    t.comment(
      `PostgreSQL crash + Redis down: ${phase.length} responses ${JSON.stringify(byStatus(phase))}; inside the outage ${outage.length} ${JSON.stringify(byStatus(outage))}`,
    );
    t.same(bad(phase), [], 'no 5xx other than 503, no connection errors');
    t.ok(
      outage.length >= 10 && outage.every((o) => o.status === 503),
      'every request during the outage: 503',
    );
    t.ok(
      phase.every((o) => o.rateLimited),
      'RateLimit headers on every response',
    );
    await waitUntil(
      'the service to answer health ?db=1 again',
      async () => (await fetch(`${base}/api/v1/health?db=1`)).status === 200,
      { timeoutMs: 30_000, everyMs: 200 },
    );
    const after = await load(1000);
    t.same(
      after.filter((o) => o.status >= 400),
      [],
      'recovered without a restart',
    );
  });

  t.test('every acknowledged write is in the database', async (t) => {
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    t.teardown(() => sql.end({ timeout: 5 }));
    const ids = [...acknowledged.keys()];
    const rows = await sql<
      { external_id: string; id: string }[]
    >`select external_id, id from listings where external_id = any(${ids})`;
    const stored = new Map(rows.map((r) => [r.external_id, r.id]));
    const lost = ids.filter((id) => stored.get(id) !== acknowledged.get(id));
    const writes = outcomes.filter((o) => o.op === 'write');
    const total = byStatus(outcomes);
    t.comment(
      `totals: ${outcomes.length} responses ${JSON.stringify(total)}; writes sent ${writes.length}, acknowledged ${ids.length}, ` +
        `answered 503 ${writes.filter((o) => o.status === 503).length}; verified in PostgreSQL ${ids.length - lost.length}`,
    );
    t.ok(ids.length > 50, 'many writes were acknowledged');
    t.same(lost, [], 'no acknowledged write was lost');
    t.same(bad(outcomes), [], 'over the whole run: no 5xx other than 503, every request answered');
  });

  t.test('nothing secret was logged through the faults', async (t) => {
    const all = text();
    t.ok(all.includes('backing service unavailable'), 'the 503s were logged');
    t.notOk(all.includes(key.slice('svc_sandbox_'.length)), 'the API key never appears');
  });
}
