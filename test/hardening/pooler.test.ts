/**
 * Behind a connection pooler in transaction mode (docs/operations.md, "Behind a connection
 * pooler"): a real PgBouncer (`pool_mode = transaction`, Debian's 1.18 has no prepared statement
 * support) in front of a private PostgreSQL cluster.
 *
 * - The migration lock no longer leaks: a session-level advisory lock taken through the pooler
 *   outlives its client (shown first, so the test can see the old failure), while starts that
 *   migrate through the pooler with a pool of two server connections, one after the other and
 *   three at once, and an admin command after them, all finish in bounded time and leave no
 *   advisory lock behind.
 * - LISTEN through the pooler succeeds and never hears a notification; on the direct URL it does.
 * - Two server processes with DATABASE_URL at the pooler and DATABASE_DIRECT_URL at the cluster
 *   serve listings across each other, and hear revocations through their LISTEN on the direct
 *   URL: a key revoked by another process is refused by both within a second (not after the
 *   10 s the key cache would otherwise hold it).
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import t from 'tap';
import { runAdmin } from '../../src/cli/admin.ts';
import { openDatabase } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import {
  pgbouncerMissing,
  startPrivatePgbouncer,
  startServerProcess,
  withPrivateServers,
  type PrivatePostgres,
  type ServerProcess,
} from '../helpers/private-servers.ts';
import { requirePart } from '../helpers/system-parts.ts';
import { buildLoggedApp } from './support.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';

requirePart(t, pgbouncerMissing());

/** Each start, migration or admin command must end within this. */
const BOUND_MS = 30_000;

const within = <T>(what: string, promise: Promise<T>, ms = BOUND_MS): Promise<T> =>
  deadline(what, promise, ms);

await withPrivateServers(t, 'PgBouncer in transaction mode', { redis: false }, pooled);

async function pooled(pg: PrivatePostgres): Promise<void> {
  // Two server connections per database: a leaked lock would sit on one in two.
  const bouncer = await startPrivatePgbouncer(t, pg, { poolSize: 2 });
  const direct = postgres(pg.url, { max: 1, onnotice: () => {} });
  t.teardown(() => direct.end({ timeout: 5 }));
  const advisoryLocks = async (database: string) =>
    (
      await direct<{ n: number }[]>`select count(*)::int as n from pg_locks l
        join pg_database d on d.oid = l.database
        where l.locktype = 'advisory' and d.datname = ${database}`
    )[0]!.n;

  t.test('a session lock taken through the pooler outlives its client', async (t) => {
    await direct`create database leak_check`;
    const client = postgres(bouncer.urlOf('leak_check'), {
      max: 1,
      prepare: false,
      onnotice: () => {},
    });
    await client`select pg_advisory_lock(424242)`;
    await client.end({ timeout: 5 });
    t.equal(
      await advisoryLocks('leak_check'),
      1,
      'still held by the server connection the pooler kept: the old migration lock leaked so',
    );
    await direct`drop database leak_check with (force)`;
  });

  t.test('LISTEN through the pooler succeeds and hears nothing; direct, it hears', async (t) => {
    const heard = { pooled: 0, direct: 0 };
    const pooledClient = postgres(bouncer.url, { max: 1, prepare: false, onnotice: () => {} });
    const directClient = postgres(pg.url, { max: 1, onnotice: () => {} });
    t.teardown(() => Promise.all([pooledClient.end(), directClient.end()]));
    await pooledClient.listen('pooler_check', () => (heard.pooled += 1));
    await directClient.listen('pooler_check', () => (heard.direct += 1));
    // Sent through the pooler too, from another transaction: as an instance's commit would.
    const sender = postgres(bouncer.url, { max: 1, prepare: false, onnotice: () => {} });
    await sender`select pg_notify('pooler_check', 'x')`;
    await sender.end();
    await waitUntil('the direct listener', () => heard.direct > 0, { timeoutMs: 5_000 });
    // A notification comes in before the answer to the next statement on the same connection:
    // one round trip through the pooler, and the pooled listener would have heard it by now.
    await pooledClient`select 1`;
    t.same(heard, { pooled: 0, direct: 1 }, 'only the direct LISTEN heard it');
  });

  t.test('starts and an admin command through the pooler finish; no lock is left', async (t) => {
    await direct`create database migrations_pooled`;
    const pooledUrl = bouncer.urlOf('migrations_pooled');
    // The worst case: no DATABASE_DIRECT_URL, so migrations and their lock go through the pooler.
    const start = async (what: string) => {
      const began = performance.now();
      const handle = await within(
        what,
        openDatabase({ databaseUrl: pooledUrl, preparedStatements: false, pgliteDir: '' }),
      );
      await queryRows(handle.db, sql`select 1`);
      await handle.close();
      return performance.now() - began;
    };
    const times = [await start('first start'), await start('second start')];
    times.push(...(await Promise.all([1, 2, 3].map((i) => start(`start ${i} of 3 at once`)))));
    t.pass(`five starts, ${times.map((ms) => ms.toFixed(0)).join(', ')} ms`);
    const admin = await within(
      'npm run admin',
      runAdmin(['user', 'create', '--username', 'after_starts'], {
        NODE_ENV: 'test',
        DATABASE_URL: pooledUrl,
        DATABASE_PREPARED_STATEMENTS: 'off',
        USER_PASSWORD: 'correct horse battery staple 42',
      }),
    );
    t.equal(admin.code, 0, `the admin command after them (stderr: ${admin.stderr.trim()})`);
    t.equal(await advisoryLocks('migrations_pooled'), 0, 'no advisory lock left behind');
    const check = postgres(pg.urlOf('migrations_pooled'), { max: 1, onnotice: () => {} });
    const [applied] = await check<{ n: number }[]>`
      select count(*)::int as n from drizzle.__drizzle_migrations`;
    await check.end({ timeout: 5 });
    t.ok(applied!.n > 10, `every migration applied once (${applied!.n})`);
  });

  t.test('two instances through the pooler, LISTEN on the direct URL', async (t) => {
    await direct`create database instances_pooled`;
    const database = {
      DATABASE_URL: bouncer.urlOf('instances_pooled'),
      DATABASE_DIRECT_URL: pg.urlOf('instances_pooled'),
    };
    // This process stands for the admin CLI: it prepares accounts and revokes a key.
    const { app } = await buildLoggedApp(
      t,
      { ...database, WEBHOOK_WORKER: 'false', SAVED_SEARCH_MATCHER: 'false' },
      'warn',
    );
    t.equal(app.config.databasePreparedStatements, false, 'no prepared statements by default');
    const env = {
      ...database,
      SESSION_SECRET: 'a shared session secret of at least 32 characters',
      LOG_LEVEL: 'warn',
    };
    const began = performance.now();
    const both = (await within(
      'two servers starting at once',
      Promise.all([startServerProcess(t, env), startServerProcess(t, env)]),
      60_000,
    )) as [ServerProcess, ServerProcess];
    t.pass(`both listening after ${(performance.now() - began).toFixed(0)} ms`);
    const [a, b] = both;
    const developer = await createDeveloper(app);
    const api = (
      server: ServerProcess,
      method: string,
      path: string,
      key: string,
      body?: unknown,
    ) =>
      fetch(`${server.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(15_000),
      });

    const key = await createKey(app, developer, 'sandbox');
    const created = await api(a, 'POST', '/api/v1/listings', key, {
      title: 'Written on A through the pooler',
      price_cents: 1500,
    });
    t.equal(created.status, 201);
    const listing = ((await created.json()) as { data: { id: string } }).data;
    const read = await api(b, 'GET', `/api/v1/listings/${listing.id}`, key);
    t.equal(read.status, 200, 'read on B');
    t.same(((await read.json()) as { data: unknown }).data, listing);
    const feed = await api(b, 'GET', '/api/v1/listings?limit=5', key);
    t.equal(feed.status, 200, "B's feed");

    const { id, key: revoked } = await app.services.keys.create({
      appId: developer.appId,
      env: 'sandbox',
    });
    // Twice each: the second answer comes from the key cache.
    for (const server of [a, b, a, b])
      t.equal((await api(server, 'GET', '/api/v1/me', revoked)).status, 200, 'held by each');
    await app.services.keys.revoke(id);
    const revokedAt = performance.now();
    for (const server of both)
      await waitUntil(
        `401 on port ${server.port}`,
        async () => (await api(server, 'GET', '/api/v1/me', revoked)).status === 401,
        { timeoutMs: 2_000, everyMs: 5 },
      );
    const ms = performance.now() - revokedAt;
    t.ok(ms < 1000, `a revoked key refused by both within a second: ${ms.toFixed(0)} ms`);

    for (const server of both) server.child.kill('SIGTERM');
    for (const server of both) {
      t.same(await server.waitExit(30_000), { code: 0, signal: null }, `${server.port} exits 0`);
      const errors = server.logs().filter((line) => Number(line.level) >= 50);
      t.same(errors, [], `port ${server.port}: no error logged`);
      const warnings = server.logs().filter((line) => /cannot LISTEN/.test(String(line.msg)));
      t.same(warnings, [], `port ${server.port}: every LISTEN took effect`);
    }
  });
}
