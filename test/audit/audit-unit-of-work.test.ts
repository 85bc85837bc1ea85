/**
 * Issue #61, "actions that change a credential, a member or an endpoint without an audit entry:
 * 0": a change and its audit entry are one unit of work (AuditService.audited,
 * src/db/unit-of-work.ts) at every door. An entry the database refuses (a trigger on
 * audit_events, made in this test's database) rolls its change back: through a portal form, the
 * admin CLI and the API with a key, nothing changed; once the database takes entries again,
 * each door's change is made and recorded. What is slow or external (an enable's check ping) is
 * done before the unit, no transaction held while it waits.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { COMMANDS } from '../../src/cli/admin.ts';
import { queryRows } from '../../src/db/rows.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { createApp, createKeyInPortal, signUp } from '../portal/support.ts';
import { api, createEndpoint, startReceiver, webhooksApp } from '../webhooks/support.ts';

// No background transactions (the delivery worker's claims, the matcher's passes, the request
// log's batches): the only ones open are the doors'.
const app = await webhooksApp(t, {
  WEBHOOK_WORKER: 'false',
  SAVED_SEARCH_MATCHER: 'false',
  REQUEST_LOGS: 'false',
});
const { db } = app;

await db.execute(
  sql.raw(`create function audit_refused() returns trigger language plpgsql as $$
    begin raise exception 'audit entry refused (test)'; end $$`),
);
const refuseEntries = (refuse: boolean) =>
  db.execute(
    sql.raw(
      refuse
        ? 'create trigger audit_refused before insert on audit_events for each row execute function audit_refused()'
        : 'drop trigger audit_refused on audit_events',
    ),
  );

const count = async (query: ReturnType<typeof sql>) =>
  (await queryRows<{ n: number }>(db, query))[0]!.n;
const keysOf = (appId: string) =>
  count(sql`select count(*)::int as n from api_keys where app_id = ${appId}`);
const entriesOf = (appId: string, action: string) =>
  count(
    sql`select count(*)::int as n from audit_events where app_id = ${appId} and action = ${action}`,
  );
const cli = (command: string, flags: Record<string, string>) =>
  COMMANDS[command]!.run(app.services, new Map(Object.entries(flags).map(([k, v]) => [k, [v]])));

const owner = await signUp(app);
const appId = await createApp(owner, 'Audited together');
const keysUrl = `/portal/apps/${appId}/keys`;

t.test('a portal form: the key is not made without its entry', async (t) => {
  const before = await keysOf(appId);
  await refuseEntries(true);
  const res = await owner.browser.act(keysUrl, keysUrl, { env: 'sandbox', scopes: ['read'] });
  await refuseEntries(false);
  t.equal(res.statusCode, 500, 'the change fails with its entry');
  t.equal(await keysOf(appId), before, 'no key made');
  t.equal(await entriesOf(appId, 'key.created'), 0, 'and nothing recorded');

  t.ok(await createKeyInPortal(owner, appId, { scopes: ['read'] }), 'then it is made');
  t.equal(await keysOf(appId), before + 1);
  t.equal(await entriesOf(appId, 'key.created'), 1, 'and recorded');
});

t.test('a portal form: a revoke without its entry leaves the key working', async (t) => {
  const key = await app.services.keys.create({ appId, env: 'sandbox', scopes: 'read' });
  const me = () => api(app, 'GET', '/api/v1/me', key.key);
  t.equal((await me()).status, 200, 'the key works (and is held)');
  const revoke = () => owner.browser.act(keysUrl, `${keysUrl}/revoke`, { key_id: key.id });
  await refuseEntries(true);
  const res = await revoke();
  await refuseEntries(false);
  t.equal(res.statusCode, 500);
  t.equal(
    await count(
      sql`select count(*)::int as n from api_keys where id = ${key.id} and revoked_at is null`,
    ),
    1,
    'not revoked',
  );
  t.equal((await me()).status, 200, 'and still works');
  t.equal(await entriesOf(appId, 'key.revoked'), 0);

  const done = await revoke();
  t.equal(done.statusCode, 303, 'then it is revoked');
  t.equal((await me()).status, 401, 'and no longer works');
  t.equal(await entriesOf(appId, 'key.revoked'), 1, 'and recorded');
});

t.test('the admin CLI: a member is not added without the entry', async (t) => {
  const member = await signUp(app);
  const flags = { app: appId, username: member.username, role: 'developer' };
  const members = async () => (await app.services.apps.members(appId)).map((m) => m.username);
  await refuseEntries(true);
  await t.rejects(cli('app member add', flags), /audit_events/, 'the command fails');
  await refuseEntries(false);
  t.notOk((await members()).includes(member.username), 'not a member');
  t.equal(await entriesOf(appId, 'member.added'), 0);

  await cli('app member add', flags);
  t.ok((await members()).includes(member.username), 'then a member');
  t.equal(await entriesOf(appId, 'member.added'), 1, 'and recorded');
});

t.test('the API with a key: an endpoint is not made without its entry', async (t) => {
  const dev = await createDeveloper(app);
  const writer = await app.services.keys.create({
    appId: dev.appId,
    env: 'sandbox',
    scopes: 'read webhooks:write',
  });
  const endpoints = () =>
    count(sql`select count(*)::int as n from webhook_endpoints where app_id = ${dev.appId}`);
  const url = 'https://93.184.215.14/hooks/together';
  await refuseEntries(true);
  const refused = await api(app, 'POST', '/api/v1/webhook_endpoints', writer.key, { url });
  await refuseEntries(false);
  t.equal(refused.status, 500, 'the request fails with its entry');
  t.equal(await endpoints(), 0, 'no endpoint made');

  const created = await api(app, 'POST', '/api/v1/webhook_endpoints', writer.key, { url });
  t.equal(created.status, 201, 'then it is made');
  t.equal(await endpoints(), 1);
  t.equal(await entriesOf(dev.appId, 'endpoint.created'), 1, 'and recorded');
});

t.test("an enable's check ping waits outside the unit of work", async (t) => {
  const receiver = await startReceiver(t);
  t.teardown(() => receiver.close());
  const endpoint = await createEndpoint(app, receiver, { appId, path: '/slow' });
  await app.services.endpoints.disable(endpoint.id);
  // While the ping waits for its answer, the database is asked which transactions are open: one
  // held around the ping would show (PostgreSQL) or hold the question back (PGlite, one
  // connection) until after the answer.
  let probe: Promise<{ at: number; open: number }> | undefined;
  receiver.reply = () => {
    probe ??= queryRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and state like 'idle in transaction%'`,
    ).then(([row]) => ({ at: Date.now(), open: row!.n }));
    return { status: 200, delayMs: 800 };
  };
  const page = `/portal/apps/${appId}/webhooks/${endpoint.id}`;
  const res = await owner.browser.act(page, `${page}/enable`, {});
  t.equal(res.statusCode, 303, 'enabled');
  const seen = await probe!;
  const answeredAt = receiver.to('/slow')[0]!.answeredAt!;
  t.ok(seen.at < answeredAt, 'the database answered while the ping waited');
  t.equal(seen.open, 0, 'no transaction open during the ping');
  t.equal(await entriesOf(appId, 'endpoint.enabled'), 1, 'and the enable recorded');
});
