/**
 * Zero-downtime restarts of the API itself (issue #60, item 5; docs/operations.md "Rolling
 * restarts"): two real server processes (built as `npm start` runs them) on one private
 * PostgreSQL cluster, behind Debian's HAProxy with its health check on `GET /api/v1/health?db=1`.
 * Under load through HAProxy (writers creating listings with an Idempotency-Key each, anonymous
 * readers, a long poll), each process in turn gets SIGTERM, drains and exits 0, is started
 * again on its port, and is seen UP by HAProxy before the next one goes. Every request must be
 * answered 2xx: no 5xx from HAProxy (502/503), no connection reset. Every acknowledged create is
 * in the database afterwards.
 *
 * It needs HAProxy and PostgreSQL's server binaries, so it is a .ci.ts file (.ci/run runs it,
 * after installing them; `npx tap test/hardening/rolling-restart.ci.ts` runs it by hand).
 */
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { CHECK, haproxyMissing, startHaproxy } from '../helpers/haproxy.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  privateServersMissing,
  startPrivatePostgres,
  startServerProcess,
  type ServerProcess,
} from '../helpers/private-servers.ts';
import { freePort } from '../helpers/processes.ts';
import { requirePart } from '../helpers/system-parts.ts';
import { waitUntil } from '../helpers/wait.ts';
import { buildLoggedApp } from './support.ts';

requirePart(t, haproxyMissing());
requirePart(t, privateServersMissing());

const WRITERS = 4;
const READERS = 2;

t.test('two processes restarted one at a time under load through HAProxy', async (t) => {
  const pg = await startPrivatePostgres(t);
  // Migrates the cluster's database and makes the writers' key (this process serves nothing).
  const { app } = await buildLoggedApp(
    t,
    { DATABASE_URL: pg.url, WEBHOOK_WORKER: 'false', SAVED_SEARCH_MATCHER: 'false' },
    'warn',
  );
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');

  const env = {
    DATABASE_URL: pg.url,
    SESSION_SECRET: 'a shared session secret of at least 32 characters',
    // Every request comes from HAProxy's address; the limits are not the subject here.
    RATE_LIMIT_MAX: '1000000',
    // Long enough for HAProxy to see the health check fail (CHECK.fall checks, CHECK.interMs
    // apart) before the listener closes: docs/operations.md "Rolling restarts".
    SHUTDOWN_DELAY_MS: String(CHECK.interMs * (CHECK.fall + 1) + 500),
    LOG_LEVEL: 'info',
  };
  const ports = { a: await freePort(), b: await freePort() };
  const servers: Record<'a' | 'b', ServerProcess> = {
    a: await startServerProcess(t, { ...env, PORT: String(ports.a) }),
    b: await startServerProcess(t, { ...env, PORT: String(ports.b) }),
  };
  const haproxy = await startHaproxy(t, ports);
  const bothUp = async () => {
    const states = await haproxy.states();
    return states.a === 'UP' && states.b === 'UP';
  };
  await waitUntil('HAProxy to see both servers up', bothUp);

  interface Outcome {
    kind: string;
    ok: boolean;
    status: number | string;
  }
  const outcomes: Outcome[] = [];
  const acknowledged: string[] = [];
  let running = true;

  async function call(
    kind: string,
    path: string,
    init: RequestInit = {},
  ): Promise<Response | null> {
    try {
      const res = await fetch(`${haproxy.base}${path}`, {
        ...init,
        signal: AbortSignal.timeout(20_000),
      });
      if (res.ok) {
        outcomes.push({ kind, ok: true, status: res.status });
        return res;
      }
      const body = (await res.text()).slice(0, 200);
      outcomes.push({ kind, ok: false, status: `${res.status} ${body}` });
      return null;
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      outcomes.push({ kind, ok: false, status: cause?.code ?? cause?.message ?? String(err) });
      return null;
    }
  }

  async function writer(): Promise<void> {
    while (running) {
      const res = await call('create', '/api/v1/listings', {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': randomUUID(),
        },
        body: JSON.stringify(listingBody()),
      });
      if (res?.status === 201)
        acknowledged.push(((await res.json()) as { data: { id: string } }).data.id);
      else await res?.text();
    }
  }

  async function reader(): Promise<void> {
    while (running) await (await call('read', '/api/v1/listings?limit=20'))?.text();
  }

  async function longPoll(): Promise<void> {
    let cursor: string | undefined;
    while (running) {
      const query = `wait=2&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await call('long poll', `/api/v1/events?${query}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      if (res?.ok)
        cursor = ((await res.json()) as { meta: { next_cursor: string } }).meta.next_cursor;
      else await res?.text();
    }
  }

  const load = Promise.all([
    ...Array.from({ length: WRITERS }, writer),
    ...Array.from({ length: READERS }, reader),
    longPoll(),
  ]);

  // HAProxy's view of each server, sampled through the restarts.
  const seen: Record<string, string[]> = { a: [], b: [] };
  const sampling = (async () => {
    while (running) {
      const states = await haproxy.states();
      for (const name of ['a', 'b'] as const)
        if (seen[name]!.at(-1) !== states[name]) seen[name]!.push(states[name]!);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();

  const started = Date.now();
  await waitUntil('the load to be running', () => acknowledged.length >= 20, { timeoutMs: 30_000 });
  for (const name of ['a', 'b'] as const) {
    const old = servers[name];
    old.child.kill('SIGTERM');
    const exit = await old.waitExit(30_000);
    t.equal(exit.code, 0, `${name} drained and exited 0`);
    servers[name] = await startServerProcess(t, { ...env, PORT: String(ports[name]) });
    await waitUntil(`HAProxy to see ${name} up again`, bothUp, { timeoutMs: 30_000 });
  }
  // A moment of load on the two restarted processes (both serving).
  const after = outcomes.length;
  await waitUntil('requests served after the restarts', () => outcomes.length >= after + 50);
  running = false;
  await Promise.all([load, sampling]);

  const failed = outcomes.filter((o) => !o.ok);
  const byKind = (kind: string) => outcomes.filter((o) => o.kind === kind).length;
  t.comment(
    `rolling restart of 2 processes in ${((Date.now() - started) / 1000).toFixed(1)} s: ` +
      `${outcomes.length} requests (${byKind('create')} creates, ${byKind('read')} reads, ` +
      `${byKind('long poll')} long polls), ${failed.length} failed`,
  );
  t.comment(`HAProxy saw a: ${seen.a!.join(' -> ')}; b: ${seen.b!.join(' -> ')}`);
  t.same(
    failed.slice(0, 10),
    [],
    `no failed request among ${outcomes.length} (failed: ${failed.length})`,
  );
  t.ok(byKind('create') > 50 && byKind('read') > 50 && byKind('long poll') > 2, 'load ran');
  for (const name of ['a', 'b'] as const)
    t.ok(seen[name]!.includes('DOWN'), `HAProxy marked ${name} down while it drained`);

  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end());
  const [row] = await sql<{ count: string }[]>`
    select count(*) from listings where id = any(${acknowledged}::uuid[])`;
  t.equal(
    Number(row!.count),
    acknowledged.length,
    `all ${acknowledged.length} acknowledged creates are stored`,
  );
});
