/**
 * Graceful shutdown of the real server process (src/server.ts) on a private PostgreSQL:
 *
 * - SIGTERM with requests in flight (held on a table lock) and a webhook attempt in flight
 *   (a receiver that answers late): new connections are refused at once, the requests are
 *   answered, the attempt's outcome is recorded, then the pools close and the exit code is 0;
 * - a second signal exits at once, whatever is in flight;
 * - a request held longer than its share of SHUTDOWN_TIMEOUT_MS is cut, and the process still
 *   exits 0 inside the deadline (test/hardening/drain.test.ts: every other kind of work).
 */
import { eq } from 'drizzle-orm';
import http from 'node:http';
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { webhookDeliveries } from '../../src/db/outbox-schema.ts';
import { listings } from '../../src/db/schema.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import {
  closeTookMs,
  startServerProcess,
  withPrivateServers,
  type PrivatePostgres,
  type ServerProcess,
} from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { buildLoggedApp } from './support.ts';

await withPrivateServers(t, 'shutdown against a private PostgreSQL', { redis: false }, shutdown);

async function shutdown(pg: PrivatePostgres): Promise<void> {
  const { app } = await buildLoggedApp(
    t,
    {
      DATABASE_URL: pg.url,
      WEBHOOK_WORKER: 'false',
      SAVED_SEARCH_MATCHER: 'false',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    },
    'warn',
  );
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const env = {
    DATABASE_URL: pg.url,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '100000',
  };

  const admin = postgres(pg.url, { max: 4, onnotice: () => {} });
  t.teardown(() => admin.end({ timeout: 5 }));

  /** Holds an exclusive lock on the listings table until released: requests touching it wait. */
  async function lockListings(): Promise<{ release: () => Promise<void> }> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const transaction = admin.begin(async (sql) => {
      await sql`lock table listings in access exclusive mode`;
      locked();
      await released;
    });
    await isLocked;
    return {
      release: async () => {
        release();
        await transaction;
      },
    };
  }

  /** Backends of the server waiting on that lock. */
  const waitingOnLock = async () =>
    Number(
      (
        await admin`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock'`
      )[0]!.n,
    );

  /** One request sent while the listings table is locked, waiting on that lock. */
  async function heldOnLock<T>(t: Test, send: () => Promise<T>) {
    const lock = await lockListings();
    t.teardown(() => lock.release());
    const inFlight = send();
    await waitUntil('a request waiting on the lock', async () => (await waitingOnLock()) >= 1, {
      timeoutMs: 15_000,
    });
    return { lock, inFlight };
  }

  const request = (server: ServerProcess, method: 'GET' | 'POST', body?: unknown) =>
    fetch(`${server.base}/api/v1/listings`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000),
    }).then(
      async (res) => ({
        status: res.status,
        body: (await res.json()) as { data?: { id?: string } },
      }),
      (err: unknown) => ({ status: 0, body: {}, error: String(err) }),
    );

  const refused = async (server: ServerProcess) => {
    try {
      await fetch(`${server.base}/api/v1/health`, { signal: AbortSignal.timeout(2000) });
      return false;
    } catch (err) {
      return /ECONNREFUSED/.test(String((err as { cause?: unknown }).cause ?? err));
    }
  };

  /** Until the server has taken the signal (its log says it is shutting down). */
  const shuttingDown = (server: ServerProcess) =>
    waitUntil('the signal to be taken', () =>
      server.logs().some((l) => l.msg === 'shutting down: finishing in-flight requests'),
    );

  t.test(
    'SIGTERM: in-flight requests and the webhook attempt finish, new connections are refused, exit 0',
    async (t) => {
      const receiver = await startReceiver(t);
      await createEndpoint(app, receiver, { appId: developer.appId, path: '/slow' });
      // A slow receiver: it answers after 2 s (the receiver notes when, answeredAt).
      receiver.reply = () => ({ status: 200, delayMs: 2000 });
      const server = await startServerProcess(t, env);

      // A webhook attempt in flight: the receiver holds it for 2 s.
      const created = await request(server, 'POST', {
        title: 'Triggers a slow webhook',
        price_cents: 700,
      });
      t.equal(created.status, 201);
      await waitUntil(
        'the webhook attempt to reach the receiver',
        () => receiver.to('/slow').length === 1,
        { timeoutMs: 15_000 },
      );

      // Requests in flight: held by a lock on the listings table.
      const lock = await lockListings();
      const inFlight = [
        request(server, 'GET'),
        request(server, 'POST', {
          title: 'Written during shutdown 1',
          price_cents: 701,
          external_id: 'shutdown-1',
        }),
        request(server, 'GET'),
        request(server, 'POST', {
          title: 'Written during shutdown 2',
          price_cents: 702,
          external_id: 'shutdown-2',
        }),
      ];
      await waitUntil('4 requests waiting on the lock', async () => (await waitingOnLock()) >= 4, {
        timeoutMs: 15_000,
      });

      const signalledAt = Date.now();
      server.child.kill('SIGTERM');
      await waitUntil('new connections to be refused', () => refused(server), {
        timeoutMs: 5000,
        everyMs: 50,
      });
      t.pass('new connections are refused while requests are in flight');
      // The drain cannot end while the lock holds the requests: they are answered below.
      t.equal(server.child.exitCode, null, 'still running while requests are in flight');
      await lock.release();

      const answers = await Promise.all(inFlight);
      t.same(
        answers.map((a) => a.status),
        [200, 201, 200, 201],
        'every in-flight request is answered',
      );
      const exit = await server.waitExit(30_000);
      const exitedAt = Date.now();
      const answeredAt = receiver.to('/slow')[0]?.answeredAt ?? 0;
      t.same(exit, { code: 0, signal: null }, 'exit code 0');
      t.ok(
        answeredAt > 0 && exitedAt >= answeredAt,
        `the process waited for the webhook answer (${answeredAt - signalledAt} ms after the signal)`,
      );
      const deliveries = await app.db
        .select()
        .from(webhookDeliveries)
        .orderBy(webhookDeliveries.createdAt);
      t.same(
        [deliveries[0]?.status, deliveries[0]?.attempts],
        ['succeeded', 1],
        'the attempt in flight was recorded before the pools closed',
      );
      t.ok(
        deliveries.every(
          (d) => d.status === 'succeeded' || (d.status === 'pending' && d.attempts === 0),
        ),
        `no attempt was left claimed but unrecorded (${deliveries.map((d) => `${d.status}/${d.attempts}`).join(', ')}); pending ones wait for another instance or the restart`,
      );
      const written = await app.db
        .select({ id: listings.id })
        .from(listings)
        .where(eq(listings.externalId, 'shutdown-2'));
      t.equal(written.length, 1, 'writes answered during the drain are stored');
      const messages = server.logs().map((l) => l.msg);
      t.ok(
        messages.includes('shutting down: finishing in-flight requests') &&
          messages.includes('shut down'),
        'logged',
      );
    },
  );

  t.test('a second signal exits at once', async (t) => {
    const server = await startServerProcess(t, env);
    const lock = await lockListings();
    t.teardown(() => lock.release());
    const inFlight = [request(server, 'GET'), request(server, 'GET')];
    await waitUntil('2 requests waiting on the lock', async () => (await waitingOnLock()) >= 2, {
      timeoutMs: 15_000,
    });
    server.child.kill('SIGTERM');
    await shuttingDown(server);
    t.equal(server.child.exitCode, null, 'the first signal waits for the requests');
    const second = Date.now();
    server.child.kill('SIGINT');
    const exit = await server.waitExit(5000);
    t.ok(Date.now() - second < 3000, `exited ${Date.now() - second} ms after the second signal`);
    t.same(exit, { code: 1, signal: null }, 'exit code 1');
    t.ok(
      server.logs().some((l) => l.msg === 'second signal: exiting now'),
      'logged',
    );
    const answers = await Promise.all(inFlight);
    t.ok(
      answers.every((a) => a.status === 0),
      'the requests in flight were cut',
    );
  });

  // A browser keeps its idle connections for minutes. One whose request was in flight at the
  // signal goes idle after its answer; kept open, it would hold the drain until the deadline.
  t.test('a keep-alive connection busy at the signal does not hold the exit', async (t) => {
    const server = await startServerProcess(t, { ...env, SHUTDOWN_TIMEOUT_MS: '60000' });
    const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60_000, maxSockets: 1 });
    t.teardown(() => agent.destroy());
    const get = () =>
      new Promise<number>((resolve, reject) => {
        const req = http.get(
          `${server.base}/api/v1/listings`,
          { agent, headers: { authorization: `Bearer ${key}` } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
      });
    t.equal(await get(), 200, 'the connection is open and kept alive');
    const { lock, inFlight } = await heldOnLock(t, get);
    const signalledAt = Date.now();
    server.child.kill('SIGTERM');
    await shuttingDown(server);
    await lock.release();
    t.equal(await inFlight, 200, 'the request in flight is answered');
    const exit = await server.waitExit(30_000);
    const took = Date.now() - signalledAt;
    t.same(exit, { code: 0, signal: null }, 'exit code 0');
    t.ok(took < 5000, `exited ${took} ms after the signal, the client's idle connection closed`);
  });

  // Each close step has its share of SHUTDOWN_TIMEOUT_MS (src/plugins/graceful-close.ts): a
  // request held on a lock is cut at half of it and its statement when the pools end, so the
  // process exits 0 inside the deadline instead of being cut short by it.
  t.test(
    'a request held past its share of SHUTDOWN_TIMEOUT_MS is cut; exit 0 in time',
    async (t) => {
      const server = await startServerProcess(t, { ...env, SHUTDOWN_TIMEOUT_MS: '3000' });
      const { inFlight } = await heldOnLock(t, () => request(server, 'GET'));
      const signalledAt = Date.now();
      server.child.kill('SIGTERM');
      const exit = await server.waitExit(10_000);
      const took = Date.now() - signalledAt;
      t.same(exit, { code: 0, signal: null }, 'exit code 0');
      const tookMs = closeTookMs(server);
      t.ok(tookMs >= 1400 && tookMs < 3000, `closed after the requests' share (${tookMs} ms)`);
      t.ok(took >= tookMs && took < 10_000, `exited ${took} ms after the signal`);
      t.equal((await inFlight).status, 0, 'the request was cut');
      t.notOk(
        server.logs().some((l) => l.msg === 'shutdown took too long: exiting now'),
        'the exit-anyway timer did not fire',
      );
    },
  );
}
