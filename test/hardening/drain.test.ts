/**
 * SIGTERM finishes within SHUTDOWN_TIMEOUT_MS whatever is in flight (docs/operations.md,
 * graceful shutdown): the real server process (startServerProcess) on this run's database (a
 * fresh PostgreSQL database, or an embedded PGlite directory), one kind of work per test, each
 * process exiting 0 well inside its deadline:
 *
 * - a browser's connections: an idle keep-alive one, one opened ahead of need that has sent
 *   nothing, one stopped in the middle of its headers (these two held the drain until the
 *   deadline or Node's 75 s headersTimeout: the portal's second-level test saw it);
 * - a waiting long poll, answered at once with an empty page;
 * - a request whose body stalls, cut at its share of the deadline;
 * - a webhook attempt to a receiver that never answers in time, cut and recorded;
 * - request-log entries waiting to be written: written; and, on PostgreSQL, a write held by a
 *   lock on the table, given up at its share;
 * - a fatal error (an uncaught exception, an unhandled rejection, raised by
 *   test/fixtures/fatal-error.mjs): logged without the secret its message holds, the same drain,
 *   then exit 1.
 */
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { webhookDeliveries } from '../../src/db/outbox-schema.ts';
import { requestLogs } from '../../src/db/primary-request-log-schema.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { closeTookMs, startServerProcess, type ServerProcess } from '../helpers/private-servers.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { waitUntil } from '../helpers/wait.ts';

const databaseUrl = await freshDatabaseUrl(t);
const onPostgres = databaseUrl !== 'memory://';
const scratch = mkdtempSync(path.join(tmpdir(), 'drain-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const dbEnv: Record<string, string> = onPostgres
  ? { DATABASE_URL: databaseUrl }
  : { DATABASE_URL: '', PGLITE_DIR: path.join(scratch, 'pglite') };

/**
 * The app in this process, on the same database, while no server runs (an embedded directory
 * has one user at a time; on PostgreSQL it is simply closed again).
 */
async function withApp<T>(use: (app: FastifyInstance) => Promise<T>): Promise<T> {
  const config = loadConfig({
    NODE_ENV: 'test',
    WEBHOOK_WORKER: 'false',
    SAVED_SEARCH_MATCHER: 'false',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    ...dbEnv,
  });
  const app = await buildApp(config, { logger: false });
  try {
    return await use(app);
  } finally {
    await app.close();
  }
}

const { developer, key } = await withApp(async (app) => {
  const developer = await createDeveloper(app);
  return { developer, key: await createKey(app, developer, 'sandbox') };
});

const env = {
  ...dbEnv,
  LOG_LEVEL: 'info',
  RATE_LIMIT_MAX: '100000',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
};

/**
 * Well inside the default 25 s: nothing waits for a timer (an embedded database's close writes
 * its files, about a second on a busy machine).
 */
const QUICK_MS = 5000;

/** SIGTERM: the exit, and how long the close took (closeTookMs: the server's own measure). */
async function terminate(server: ServerProcess, withinMs = 30_000) {
  server.child.kill('SIGTERM');
  const exit = await server.waitExit(withinMs);
  return { exit, tookMs: closeTookMs(server) };
}

const logged = (server: ServerProcess, msg: string) =>
  server.logs().filter((line) => line.msg === msg);

/** Whether the server logged that it received this request (its handler is running). */
const arrived = (server: ServerProcess, pattern: RegExp) =>
  server
    .logs()
    .some(
      (line) =>
        line.msg === 'incoming request' &&
        pattern.test(String((line.req as { url?: string } | undefined)?.url)),
    );

function connect(server: ServerProcess): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.port, '127.0.0.1');
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

const closedBy = (socket: net.Socket) =>
  new Promise<void>((resolve) => {
    if (socket.destroyed) resolve();
    socket.once('close', () => resolve());
    socket.on('error', () => {});
  });

t.test('idle browser connections do not hold the drain (default deadline)', async (t) => {
  const server = await startServerProcess(t, env);
  // A browser's kept-alive connection after its page loaded.
  const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60_000, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const status = await new Promise<number>((resolve, reject) => {
    http
      .get(`${server.base}/login`, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
  t.equal(status, 200, 'a page was loaded over a kept-alive connection');
  // A connection opened ahead of need (preconnect) that has sent nothing yet, and one whose
  // request stopped in the middle of its headers.
  const silent = await connect(server);
  const partial = await connect(server);
  partial.write('GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  const closed = [closedBy(silent), closedBy(partial)];

  const { exit, tookMs } = await terminate(server);
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(tookMs < QUICK_MS, `closed ${tookMs} ms after SIGTERM (deadline 25,000 ms)`);
  await Promise.all(closed);
  t.pass('the silent and the half-sent connections were closed by the server');
});

t.test('a waiting long poll is answered at once with an empty page', async (t) => {
  const server = await startServerProcess(t, env);
  const poll = fetch(`${server.base}/api/v1/events?wait=30`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(30_000),
  });
  await waitUntil('the long poll to arrive', () => arrived(server, /\/events\?wait=30/));
  const { exit, tookMs } = await terminate(server);
  const answer = await poll;
  t.equal(answer.status, 200, 'answered 200');
  t.equal(answer.headers.get('connection'), 'close', 'with Connection: close');
  const body = (await answer.json()) as { data: unknown[] };
  t.same(body.data, [], 'an empty page');
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(tookMs < QUICK_MS, `closed ${tookMs} ms after SIGTERM (deadline 25,000 ms)`);
});

t.test('a request whose body stalls is cut at its share of the deadline', async (t) => {
  const server = await startServerProcess(t, { ...env, SHUTDOWN_TIMEOUT_MS: '6000' });
  const socket = await connect(server);
  const closed = closedBy(socket);
  const body = JSON.stringify({ title: 'Never finished', price_cents: 100 });
  socket.write(
    `POST /api/v1/listings HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n` +
      body.slice(0, 10),
  );
  await waitUntil('the request to arrive', () => arrived(server, /\/api\/v1\/listings/));
  const { exit, tookMs } = await terminate(server);
  await closed;
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(tookMs >= 2800, `the request had its share first (${tookMs} ms)`);
  t.ok(tookMs < 5000, `closed ${tookMs} ms after SIGTERM (deadline 6,000 ms)`);
  t.equal(
    logged(
      server,
      'shutting down: requests still in flight at their share of the deadline are cut short',
    )[0]?.requests,
    1,
    'the cut is logged with the number of requests',
  );
});

t.test('a webhook attempt to a receiver that does not answer is cut and recorded', async (t) => {
  const receiver = await startReceiver(t);
  const endpoint = await withApp((app) =>
    createEndpoint(app, receiver, { appId: developer.appId, path: '/never' }),
  );
  receiver.reply = () => ({ status: 200, delayMs: 60_000 });
  const server = await startServerProcess(t, {
    ...env,
    SHUTDOWN_TIMEOUT_MS: '6000',
    WEBHOOK_TIMEOUT_MS: '60000',
  });
  const created = await fetch(`${server.base}/api/v1/listings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'Triggers a webhook nobody answers', price_cents: 700 }),
  });
  t.equal(created.status, 201);
  await waitUntil('the attempt to reach the receiver', () => receiver.to('/never').length === 1, {
    timeoutMs: 15_000,
  });
  const { exit, tookMs } = await terminate(server);
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(tookMs < 5000, `closed ${tookMs} ms after SIGTERM (deadline 6,000 ms)`);
  const deliveries = await withApp((app) =>
    app.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, endpoint.id)),
  );
  t.match(
    deliveries.map((d) => [d.status, d.attempts, d.lastError]),
    [['pending', 1, /cut short after \d+ ms: the server shut down/]],
    'the attempt is recorded as a failure, to be retried on the schedule',
  );
});

t.test('request log entries waiting at the signal are written', async (t) => {
  const server = await startServerProcess(t, env);
  const ids: string[] = [];
  for (let i = 0; i < 5; i += 1) {
    const res = await fetch(`${server.base}/api/v1/listings?i=${i}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    ids.push(res.headers.get('x-request-id')!);
  }
  const { exit, tookMs } = await terminate(server);
  t.same(exit, { code: 0, signal: null }, 'exit code 0');
  t.ok(tookMs < QUICK_MS, `closed ${tookMs} ms after SIGTERM (deadline 25,000 ms)`);
  const written = await withApp((app) =>
    app.db.select({ id: requestLogs.requestId }).from(requestLogs),
  );
  const found = new Set(written.map((row) => row.id));
  t.ok(
    ids.every((id) => found.has(id)),
    'every request made before the signal is in the request log',
  );
});

// A write held by another session's lock: PostgreSQL only (an embedded database has one session).
if (onPostgres)
  t.test('a request log write held by a lock is given up at its share', async (t: Test) => {
    const admin = postgres(databaseUrl, { max: 2, onnotice: () => {} });
    t.teardown(() => admin.end({ timeout: 5 }));
    const server = await startServerProcess(t, { ...env, SHUTDOWN_TIMEOUT_MS: '10000' });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holding = admin.begin(async (sql) => {
      await sql`lock table request_logs in access exclusive mode`;
      locked();
      await released;
    });
    t.teardown(async () => {
      release();
      await holding;
    });
    await isLocked;
    await fetch(`${server.base}/api/v1/listings`, { headers: { authorization: `Bearer ${key}` } });
    await waitUntil(
      'the request log write to wait on the lock',
      async () =>
        (
          await admin`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock'`
        )[0]!.n > 0,
    );
    const { exit, tookMs } = await terminate(server);
    t.same(exit, { code: 0, signal: null }, 'exit code 0');
    t.ok(tookMs < 9500, `closed ${tookMs} ms after SIGTERM (deadline 10,000 ms)`);
    t.equal(
      logged(server, 'shutting down: request log entries not written in time').length,
      1,
      'the entries not written are logged',
    );
  });

/** A server that raises a fatal error on SIGUSR2 (test/fixtures/fatal-error.mjs). */
const FATAL_FIXTURE = fileURLToPath(new URL('../fixtures/fatal-error.mjs', import.meta.url));

t.test('an uncaught exception is logged without its secret, drains, exits 1', async (t) => {
  const server = await startServerProcess(t, {
    ...env,
    NODE_OPTIONS: `--import=${FATAL_FIXTURE}`,
    FATAL_SECRET: key,
  });
  const poll = fetch(`${server.base}/api/v1/events?wait=30`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(30_000),
  });
  await waitUntil('the long poll to arrive', () => arrived(server, /\/events\?wait=30/));
  const raisedAt = Date.now();
  server.child.kill('SIGUSR2');
  const exit = await server.waitExit(30_000);
  t.same(exit, { code: 1, signal: null }, 'exit code 1');
  const answer = await poll;
  t.equal(answer.status, 200, 'the long poll in flight was answered');
  t.equal(answer.headers.get('connection'), 'close', 'with Connection: close');
  const fatal = logged(server, 'fatal error: finishing in-flight requests, then exiting 1');
  t.equal(fatal.length, 1, 'the error is logged once');
  t.equal(fatal[0]?.level, 60, 'at level fatal');
  t.match(fatal[0]?.err, { type: 'Error', message: /^a bug holding svc_\w+_REDACTED$/ });
  t.ok(closeTookMs(server) < QUICK_MS, `drained in ${closeTookMs(server)} ms`);
  t.ok(Date.now() - raisedAt < 10_000, 'and exited');
  t.notOk(
    `${server.stdout()}${server.stderr()}`.includes(key),
    'the secret is in no line the process wrote',
  );
});

t.test('an unhandled rejection drains the same way, exit 1', async (t) => {
  const server = await startServerProcess(t, {
    ...env,
    NODE_OPTIONS: `--import=${FATAL_FIXTURE}`,
    FATAL_SECRET: key,
    FATAL_KIND: 'rejection',
  });
  server.child.kill('SIGUSR2');
  const exit = await server.waitExit(30_000);
  t.same(exit, { code: 1, signal: null }, 'exit code 1');
  const fatal = logged(server, 'fatal error: finishing in-flight requests, then exiting 1');
  t.match(fatal, [{ level: 60, err: { message: /^a bug holding svc_\w+_REDACTED$/ } }]);
  t.equal(logged(server, 'shut down').length, 1, 'the drain ran to its end');
  t.notOk(`${server.stdout()}${server.stderr()}`.includes(key), 'the secret is not shown');
});
