/**
 * Issue #60 item 1: through the loss of the database primary behind a load balancer, a request
 * that needs the database is answered 503 service_unavailable with Retry-After within
 * DATABASE_POOL_WAIT_MS (+0.5 s), never waits out the outage; the pool reconnects with backoff
 * (at most 20 connection attempts a second for the whole process); once the server answers again
 * every request is served. docs/operations.md "High availability".
 *
 * The load balancer is a TCP proxy in this process in front of the real PostgreSQL server
 * (test/helpers/load-balancer.ts) with the two faces HAProxy shows during a failover.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { DatabaseDownError } from '../../src/db/pool-gate.ts';
import { queryRows } from '../../src/db/rows.ts';
import { runInRequestScope } from '../../src/lib/request-scope.ts';
import { buildTestApp, freshDatabaseUrl } from '../helpers/app.ts';
import { loadBalancer } from '../helpers/load-balancer.ts';
import { waitUntil } from '../helpers/wait.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const skip = !onPostgres && 'PostgreSQL only (DATABASE_URL): PGlite has no pool';

const WAIT_MS = 500;

interface Answer {
  status: number;
  ms: number;
  retryAfter: string | null;
}

for (const fault of ['close', 'hang'] as const) {
  t.test(`the load balancer ${fault === 'close' ? 'closes' : 'hangs'}`, { skip }, async (t) => {
    const lb = await loadBalancer(t, new URL(await freshDatabaseUrl(t)));
    const app = await buildTestApp(t, {
      DATABASE_URL: lb.url,
      DATABASE_POOL_WAIT_MS: String(WAIT_MS),
      RATE_LIMIT_MAX: '1000000',
    });
    const ask = async (url: string): Promise<Answer> => {
      const started = performance.now();
      const res = await app.inject({ url });
      return {
        status: res.statusCode,
        ms: performance.now() - started,
        retryAfter: (res.headers['retry-after'] as string | undefined) ?? null,
      };
    };
    const urls = ['/api/v1/health?db=1', '/api/v1/listings?limit=5'];
    for (const url of urls) t.equal((await ask(url)).status, 200, `${url} before the fault`);

    lb.set(fault);
    const from = lb.accepted.length;
    const outageStarted = performance.now();
    // Eight clients asking in a loop for 2.5 s of outage: every answer is a 503 with
    // Retry-After, none slower than the pool's wait + 0.5 s. Elapsed time is the subject.
    const answers: Answer[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, client) => {
        while (performance.now() - outageStarted < 2500)
          answers.push(await ask(urls[client % urls.length]!));
      }),
    );
    const seconds = (performance.now() - outageStarted) / 1000;
    const attempts = lb.accepted.length - from;
    const statuses = [...new Set(answers.map((a) => a.status))];
    t.same(statuses, [503], `${answers.length} answers during the outage, all 503`);
    t.ok(
      answers.every((a) => a.retryAfter !== null),
      'every 503 says when to retry (Retry-After)',
    );
    const slowest = Math.max(...answers.map((a) => a.ms));
    t.ok(slowest <= WAIT_MS + 500, `the slowest answer took ${Math.round(slowest)} ms`);
    t.ok(
      attempts / seconds <= 20,
      `${attempts} connection attempts in ${seconds.toFixed(1)} s (at most 20 a second)`,
    );

    lb.set('pass');
    await waitUntil('the pool to serve again', async () => (await ask(urls[0]!)).status === 200);
    const after = await Promise.all(
      Array.from({ length: 40 }, (_, i) => ask(urls[i % urls.length]!)),
    );
    t.same(
      [...new Set(after.map((a) => a.status))],
      [200],
      'once the server answers, every request is served (none fails on an old error)',
    );
  });
}

t.test(
  'a request that has waited meets an outage: one wait in all (issue #60)',
  { skip },
  async (t) => {
    const WAIT = 1000;
    const FIRST_WAIT = 600;
    const lb = await loadBalancer(t, new URL(await freshDatabaseUrl(t)));
    const handle = await openDatabase({
      databaseUrl: lb.url,
      pgliteDir: '',
      poolSize: 1,
      poolWaitMs: WAIT,
    });
    t.teardown(() => handle.close());
    const one = () => queryRows<{ one: number }>(handle.db, sql`select 1 as one`);
    t.same(await one(), [{ one: 1 }], 'served before the fault');

    // What requests met in the failovers measured (docs/performance.md, "Failover"): a first
    // statement (the credential read) that waited, then a second (the write) that meets the
    // primary gone: the second may wait only what the first left of the one wait. Here the first
    // waits 600 ms for the pool's one connection, held by a transaction; then the load balancer
    // ends the sessions (`close`: the next statement fails at once, and the pool is down) and goes
    // on routing to a server that never answers (`hang`).
    const [firstMs, secondMs, err] = await new Promise<[number, number, unknown]>(
      (resolve, reject) =>
        runInRequestScope(null, () => {
          void (async () => {
            let release!: () => void;
            const held = handle.db.transaction(async (tx) => {
              await tx.execute(sql`select 1`);
              await new Promise<void>((r) => (release = r));
            });
            await waitUntil('the connection to be held', () => handle.stats!().busy === 1);
            const started = performance.now();
            setTimeout(() => release(), FIRST_WAIT);
            await one();
            await held;
            const firstMs = performance.now() - started;
            lb.set('close');
            await one().then(
              () => t.fail('served through the fault'),
              () => {},
            );
            lb.set('hang');
            const second = performance.now();
            const err = await one().then(
              () => null,
              (e: unknown) => (e as { cause?: unknown }).cause ?? e,
            );
            resolve([firstMs, performance.now() - second, err]);
          })().catch(reject);
        }),
    );
    t.ok(
      err instanceof DatabaseDownError,
      'the second statement is answered 503 (DatabaseDownError)',
    );
    t.ok(
      secondMs < WAIT - FIRST_WAIT + 200,
      `the second waited ${secondMs.toFixed(0)} ms, after ${firstMs.toFixed(0)} ms for the first`,
    );
    t.ok(
      firstMs + secondMs <= WAIT + 250,
      `the request waited ${(firstMs + secondMs).toFixed(0)} ms in all (wait ${WAIT} ms)`,
    );
    lb.set('pass');
    await waitUntil(
      'the pool to serve again',
      async () => (await one().catch(() => null)) !== null,
    );
  },
);

t.test(
  'an outage met on one pool bounds the request on another that looks up (issue #60)',
  { skip },
  async (t) => {
    const WAIT = 1000;
    const FIRST_WAIT = 600;
    const url = new URL(await freshDatabaseUrl(t));
    // `replica` and `primary`: two pools, as a read the replica could not serve falls back to the
    // primary (src/db/replica.ts), each behind its own load balancer.
    const open = async () => {
      const lb = await loadBalancer(t, url);
      const handle = await openDatabase({
        databaseUrl: lb.url,
        pgliteDir: '',
        poolSize: 1,
        poolWaitMs: WAIT,
      });
      t.teardown(() => handle.close());
      const one = () => queryRows<{ one: number }>(handle.db, sql`select 1 as one`);
      t.same(await one(), [{ one: 1 }], 'served before the fault');
      return { lb, handle, one };
    };
    const replica = await open();
    const primary = await open();

    // The request waits 600 ms for the replica's one connection, then the replica's sessions
    // end (its pool is down, the read fails), and the read goes to the primary, whose load
    // balancer routes to a server that never answers: the primary's pool has heard no failure
    // yet, and its new connection would hang until its connect timeout (WAIT). Strict, the
    // statement is given up on when the request's one wait is spent.
    // Its sessions end before the request (seen by the pool while the replica's part runs), so
    // the fallback opens a connection, which hangs.
    primary.lb.set('hang');
    const [firstMs, secondMs, err] = await new Promise<[number, number, unknown]>(
      (resolve, reject) =>
        runInRequestScope(null, () => {
          void (async () => {
            let release!: () => void;
            const held = replica.handle.db.transaction(async (tx) => {
              await tx.execute(sql`select 1`);
              await new Promise<void>((r) => (release = r));
            });
            await waitUntil('the connection to be held', () => replica.handle.stats!().busy === 1);
            const started = performance.now();
            setTimeout(() => release(), FIRST_WAIT);
            await replica.one();
            await held;
            replica.lb.set('close');
            await replica.one().then(
              () => t.fail('served through the fault'),
              () => {},
            );
            const firstMs = performance.now() - started;
            const second = performance.now();
            const err = await primary.one().then(
              () => null,
              (e: unknown) => (e as { cause?: unknown }).cause ?? e,
            );
            resolve([firstMs, performance.now() - second, err]);
          })().catch(reject);
        }),
    );
    t.ok(err instanceof DatabaseDownError, 'the fallback is answered 503 (DatabaseDownError)', {
      err: String(err),
    });
    // Given up on at the request's deadline plus the overrun a touched statement has (350 ms),
    // not at the hanging connection's own timeout (WAIT): within the wait + 0.5 s in all.
    t.ok(
      secondMs < WAIT - FIRST_WAIT + 350 + 100,
      `the fallback waited ${secondMs.toFixed(0)} ms, after ${firstMs.toFixed(0)} ms on the other pool`,
    );
    t.ok(
      firstMs + secondMs <= WAIT + 500,
      `the request waited ${(firstMs + secondMs).toFixed(0)} ms in all (wait ${WAIT} ms)`,
    );
    // The primary serves again once it answers.
    primary.lb.set('pass');
    await waitUntil(
      'the primary to serve again',
      async () => (await primary.one().catch(() => null)) !== null,
    );
  },
);

t.test(
  'a statement let in as the server answers again is answered within the wait + 0.5 s (issue #60)',
  { skip },
  async (t) => {
    const WAIT = 1000;
    const lb = await loadBalancer(t, new URL(await freshDatabaseUrl(t)));
    const handle = await openDatabase({
      databaseUrl: lb.url,
      pgliteDir: '',
      poolSize: 2,
      poolWaitMs: WAIT,
    });
    t.teardown(() => handle.close());
    const one = () => queryRows<{ one: number }>(handle.db, sql`select 1 as one`);
    t.same(await one(), [{ one: 1 }], 'served before the fault');
    lb.set('close');
    await one().then(
      () => t.fail('served through the fault'),
      () => {},
    );
    // The server is back, but the pool is down until a probe is answered: a quick statement
    // probes, and the request's statement, which asked while the pool was down, is let in when
    // the probe's answer puts the pool up. It then runs long, as the first commits on a new
    // primary that wait for its synchronous standby do (here a sleep of 3 s).
    lb.set('pass');
    const [ms, err] = await new Promise<[number, unknown]>((resolve, reject) => {
      const probe = one();
      runInRequestScope(null, () => {
        void (async () => {
          const started = performance.now();
          const err = await queryRows(handle.db, sql`select pg_sleep(3)`).then(
            () => null,
            (e: unknown) => (e as { cause?: unknown }).cause ?? e,
          );
          resolve([performance.now() - started, err]);
        })().catch(reject);
      });
      probe.catch(() => {});
    });
    t.ok(err instanceof DatabaseDownError, 'answered 503 (DatabaseDownError)', {
      err: String(err),
    });
    t.ok(ms <= WAIT + 500, `answered after ${ms.toFixed(0)} ms (wait ${WAIT} ms)`);
    t.same(await one(), [{ one: 1 }], 'the pool serves');
  },
);
