/**
 * The request log on a database of its own (REQUEST_LOG_DATABASE_URL; docs/operations.md,
 * "Request log database"): two fresh databases on the PostgreSQL server at 127.0.0.1:5432,
 * whatever DATABASE_URL says (this file runs on every leg), the app on the first with its log
 * on the second. Asserted from outside, on both databases: the rows of keyed and OAuth requests
 * are on the second and not the first, the usage rollup on the first; the service the portal
 * and the CLI call, the portal's pages and `admin app logs` show them labelled with the key and
 * the token's user as before; the second database has its migrations, its day partitions (each
 * with its index on id), its lease, and no apps. With the log's database refusing connections,
 * requests are answered as ever, the rollup keeps counting, and the lost rows are counted and
 * shown once it is back.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import t from 'tap';
import { runAdmin } from '../../src/cli/admin.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { counterValue } from '../helpers/metrics.ts';
import { MISSING_PART, requirePart } from '../helpers/system-parts.ts';
import { waitUntil } from '../helpers/wait.ts';
import { createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { createApp, createKeyInPortal, signUp } from '../portal/support.ts';

const SERVER = 'postgres://postgres@127.0.0.1:5432/postgres';
const quiet = { max: 1, onnotice: () => {} };

async function serverMissing(): Promise<string | null> {
  const probe = postgres(SERVER, { ...quiet, connect_timeout: 5 });
  try {
    await probe`select 1`;
    return null;
  } catch (err) {
    return `${MISSING_PART}: PostgreSQL at 127.0.0.1:5432, user postgres with trust (${(err as Error).message})`;
  } finally {
    await probe.end({ timeout: 1 });
  }
}
requirePart(t, await serverMissing());

const server = postgres(SERVER, quiet);
t.teardown(() => server.end({ timeout: 5 }));
const suffix = `${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
const names = { primary: `t_primary_${suffix}`, log: `t_log_${suffix}` };
for (const name of Object.values(names)) await server.unsafe(`create database "${name}"`);
const urlOf = (name: string) => `postgres://postgres@127.0.0.1:5432/${name}`;
const env = {
  NODE_ENV: 'test',
  DATABASE_URL: urlOf(names.primary),
  // Not the pooler leg's direct URL, which names another database: the primary is reached directly.
  DATABASE_DIRECT_URL: '',
  REQUEST_LOG_DATABASE_URL: urlOf(names.log),
};
// Registered before the app's close, so run after it (tap runs teardowns last in, first out).
t.teardown(async () => {
  for (const name of Object.values(names))
    await server.unsafe(`drop database if exists "${name}" with (force)`);
});
const primary = postgres(env.DATABASE_URL, quiet);
const logDb = postgres(env.REQUEST_LOG_DATABASE_URL, quiet);
t.teardown(() => Promise.all([primary.end({ timeout: 5 }), logDb.end({ timeout: 5 })]));

const app = await buildTestApp(t, {
  ...env,
  RATE_LIMIT_MAX: '1000000',
  METRICS_TOKEN: 'log-database-metrics-token',
});

const owner = await signUp(app);
const appId = await createApp(owner, 'Logged apart');
const key = await createKeyInPortal(owner, appId, { name: 'Importer' });

const redirectUri = 'https://client.example.com/callback';
await app.services.apps.addRedirectUri(appId, redirectUri);
const { client_secret } = await app.services.apps.rotateClientSecret(appId);
const endUser = await createEndUser(app);
const client = {
  clientId: appId,
  clientSecret: client_secret,
  redirectUri,
  ownerUsername: owner.username,
  name: 'Logged apart',
};
const token = JSON.parse(
  (
    await exchange(
      app,
      client,
      await obtainCode(new Browser(app), client, endUser, { scope: 'read' }),
    )
  ).body,
).access_token as string;

const call = (url: string, credential: string) =>
  app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${credential}` } });

const rowsOf = (sql: postgres.Sql) =>
  sql<{ request_id: string; status: number }[]>`
    select request_id, status from request_logs where app_id = ${appId} order by created_at`;
const requestsCounted = async () => {
  const [row] = await primary<{ n: number }[]>`
    select coalesce(sum(requests), 0)::int as n from request_usage where app_id = ${appId}`;
  return row!.n;
};

const byKey = [
  await call('/api/v1/listings', key),
  await call('/api/v1/listings/00000000-0000-4000-8000-000000000000', key),
];
const byToken = await call('/api/v1/me', token);
const sent = [...byKey, byToken].map((res) => res.headers['x-request-id'] as string);

t.test("the log's rows are on its own database, the rollup on the primary", async (t) => {
  t.same(
    [...byKey, byToken].map((res) => res.statusCode),
    [200, 404, 200],
  );
  const logged = await waitUntil('the batch on the log database', async () => {
    const rows = await rowsOf(logDb);
    return rows.length === 3 ? rows : null;
  });
  t.same(logged.map((r) => r.request_id).sort(), [...sent].sort(), 'each request, once');
  t.same(await rowsOf(primary), [], 'none on the primary');
  t.equal(await requestsCounted(), 3, "the primary's rollup counts the three");
  const [tables] = await logDb<{ usage: string | null; apps: string | null }[]>`
    select to_regclass('public.request_usage')::text as usage, to_regclass('public.apps')::text as apps`;
  t.same(tables, { usage: null, apps: null }, 'no rollup and no apps on the log database');
});

t.test('the portal, its service and the CLI read them, labelled from the primary', async (t) => {
  const sandbox = await app.services.requestLogs.list(appId, { env: 'sandbox' });
  t.same(
    sandbox.items.map((r) => [r.status, r.request_id, r.key_name]),
    [
      [404, sent[1], 'Importer'],
      [200, sent[0], 'Importer'],
    ],
    "the key's requests, newest first, with its name",
  );
  t.match(sandbox.items[0]!.key_prefix, /^svc_sandbox_/, "and the key's prefix");
  t.equal(sandbox.items[0]!.username, null);
  const live = await app.services.requestLogs.list(appId, { env: 'live' });
  t.same(
    live.items.map((r) => [r.request_id, r.username, r.key_id, r.key_prefix]),
    [[sent[2], endUser.username, null, null]],
    "the token's request with its user's name",
  );

  const { request_body, response_body, ...one } = await app.services.requestLogs.get(
    appId,
    sandbox.items[1]!.id,
  );
  t.same(one, sandbox.items[1], 'the lookup by id reads the same row');
  // Its bodies (issue #59 item 6) from the log's own database: a GET has none, its answer one.
  t.equal(request_body, null);
  t.equal(JSON.parse(response_body!.text).meta.request_id, sandbox.items[1]!.request_id);

  const page = await owner.browser.get(`/portal/apps/${appId}/logs?env=sandbox`);
  t.equal(page.statusCode, 200);
  t.match(page.body, /Importer <code>svc_sandbox_/, 'the page shows the key');
  const detail = await owner.browser.get(`/portal/apps/${appId}/logs/${sandbox.items[0]!.id}`);
  t.equal(detail.statusCode, 200);
  t.match(detail.body, sent[1]!, "one request's page");

  const cli = await runAdmin(['app', 'logs', '--app', appId, '--env', 'live'], env);
  t.equal(cli.code, 0, cli.stderr);
  t.same(JSON.parse(cli.stdout), JSON.parse(JSON.stringify(live)), 'admin app logs prints it');
});

t.test('the log database has its own migrations, day partitions and lease', async (t) => {
  const [migrations] = await logDb<{ n: number }[]>`
    select count(*)::int as n from drizzle.__drizzle_request_log_migrations`;
  t.equal(migrations!.n, 2, 'its migrations, bookkept apart');
  const partitions = await logDb<{ name: string; id_index: boolean }[]>`
    select c.relname as name, exists (
        select from pg_index x where x.indrelid = c.oid
          and x.indkey::text = (select attnum::text from pg_attribute
            where attrelid = c.oid and attname = 'id')) as id_index
      from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'request_logs'::regclass order by c.relname`;
  const today = new Date().toISOString().slice(0, 10).replace(/-/g, '');
  t.ok(partitions.length >= 4, 'today and three ahead');
  t.equal(partitions[0]!.name, `request_logs_p${today}`, 'from today');
  t.ok(
    partitions.every((p) => p.id_index),
    'each with its index on id',
  );
  const [lease] = await logDb<{ name: string }[]>`select name from maintenance_leases`;
  t.equal(lease?.name, 'partitions', "the keeper's lease, on the log database");
  const [kept] = await primary<{ n: number }[]>`
    select count(*)::int as n from pg_inherits where inhparent = 'request_logs'::regclass`;
  t.ok(kept!.n >= 4, "the primary's log keeps being kept");
  const [foreign] = await logDb<{ n: number }[]>`
    select count(*)::int as n from pg_constraint where contype = 'f'`;
  t.equal(foreign!.n, 0, 'no foreign key');
});

t.test('with the log database away, requests are answered and losses counted', async (t) => {
  const before = await requestsCounted();
  const droppedCount = () => counterValue(app, 'request_log_dropped_total');
  const droppedBefore = await droppedCount();
  await server.unsafe(`alter database "${names.log}" allow_connections false`);
  await server`select pg_terminate_backend(pid) from pg_stat_activity
    where datname = ${names.log} and pid <> pg_backend_pid()`;
  // This file's own reader of the log database is gone with the rest.
  await logDb.end({ timeout: 1 });
  const away = [await call('/api/v1/listings', key), await call('/api/v1/me', token)];
  t.same(
    away.map((res) => res.statusCode),
    [200, 200],
    'answered as ever',
  );
  await waitUntil('the rollup to count them', async () => (await requestsCounted()) === before + 2);
  t.pass('the rollup on the primary counts them all the same');
  // The log's own write is sent with the rollup's, and may still be on its way (a connection
  // refused takes its time on a loaded machine): the database comes back only once both
  // entries are counted as lost, or the write might land after all and nothing be dropped.
  await waitUntil(
    'the two entries to be counted as dropped',
    async () => (await droppedCount()) >= droppedBefore + 2,
  );

  await server.unsafe(`alter database "${names.log}" allow_connections true`);
  const back = await call('/api/v1/listings', key);
  t.equal(back.statusCode, 200);
  const dropped = await waitUntil('the drops to be written', async () => {
    const sandbox = await app.services.requestLogs.list(appId, { env: 'sandbox' });
    const live = await app.services.requestLogs.list(appId, { env: 'live' });
    return sandbox.dropped && live.dropped && { sandbox, live };
  });
  t.equal(dropped.sandbox.dropped!.dropped, 1, 'the sandbox request lost, counted');
  t.equal(dropped.live.dropped!.dropped, 1, 'the live one too');
  t.equal(
    dropped.sandbox.items[0]!.request_id,
    back.headers['x-request-id'],
    'and the log written again',
  );
});
