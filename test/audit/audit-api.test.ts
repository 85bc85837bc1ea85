/**
 * GET /api/v1/audit_events (issue #61 step 3, OpenAPI listAuditEvents, "Audit log"): the key's
 * app's audit log, both environments, newest first, in keyset pages, for API keys with the
 * key-only scope audit:read (an OAuth token is 403, and /oauth/authorize refuses the scope);
 * and the changes made through the API with a key are recorded with the key as their actor,
 * never with a secret.
 */
import t from 'tap';
import { COMMANDS } from '../../src/cli/admin.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { createApp, createKeyInPortal, signUp } from '../portal/support.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';

const app = await webhooksApp(t);
const BASE = '/api/v1/audit_events';

const dev = await createDeveloper(app);
const other = await createDeveloper(app);
const keyOf = (appId: string, env: 'sandbox' | 'live', scopes: string) =>
  app.services.keys.create({ appId, env, scopes });
await app.services.apps.completeMilestone(dev.appId, 'sandbox_listing');
const auditKey = await keyOf(dev.appId, 'sandbox', 'audit:read');
const liveAuditKey = await keyOf(dev.appId, 'live', 'audit:read');
const otherKey = await keyOf(other.appId, 'sandbox', 'audit:read');

/** Records `n` changes of an app by the admin CLI, each a rename with its number as target. */
async function recordRenames(appId: string, n: number, prefix: string): Promise<string[]> {
  const targets: string[] = [];
  for (let i = 0; i < n; i += 1) {
    const target = `${prefix}-${i}`;
    await app.services.audit.record(
      appId,
      { type: 'admin_cli' },
      { action: 'app.renamed', target },
    );
    targets.push(target);
  }
  return targets;
}

const mine = await recordRenames(dev.appId, 7, 'mine');
const theirs = await recordRenames(other.appId, 3, 'theirs');

const list = async (key: string | null, query = '') => api(app, 'GET', `${BASE}${query}`, key);

t.test('who may read: API keys with audit:read only', async (t) => {
  t.equal((await list(null)).status, 401, 'no credential: 401');
  const plain = await keyOf(dev.appId, 'sandbox', 'read listings:write webhooks:write');
  const noScope = await list(plain.key);
  t.equal(noScope.status, 403, 'a key without audit:read: 403');
  t.match(noScope.body.error, { code: 'forbidden', message: /audit:read/ });

  const client = await createClient(app);
  const user = await createEndUser(app);
  const code = await obtainCode(new Browser(app), client, user, { scope: 'read listings:write' });
  const token = JSON.parse((await exchange(app, client, code)).body).access_token as string;
  const byToken = await list(token);
  t.equal(byToken.status, 403, 'an OAuth token: 403');
  t.match(byToken.body.error, { code: 'forbidden', message: /use one of the app's API keys/ });
});

t.test("only the key's app's entries, newest first, from either environment", async (t) => {
  for (const key of [auditKey, liveAuditKey]) {
    const res = await list(key.key);
    t.equal(res.status, 200);
    const targets = res.body.data.map((e: Json) => e.target);
    t.same(targets, [...mine].reverse(), `${key.env} key: its app's 7 entries, newest first`);
    t.match(res.body.meta, { environment: key.env, next_cursor: null, count: 7 });
    t.match(res.body.data[0], {
      id: String,
      at: String,
      actor: { type: 'admin_cli', id: null, name: null },
      action: 'app.renamed',
      details: {},
      ip: null,
      user_agent: null,
    });
  }
  const theirPage = await list(otherKey.key);
  t.same(
    theirPage.body.data.map((e: Json) => e.target),
    [...theirs].reverse(),
    "the other developer's key: their app's entries only",
  );
});

t.test('pages: every entry exactly once with the cursor; bad input is 400', async (t) => {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await list(auditKey.key, `?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(res.status, 200);
    t.ok(res.body.data.length <= 3, 'at most limit entries');
    seen.push(...res.body.data.map((e: Json) => e.target as string));
    cursor = res.body.meta.next_cursor;
    pages += 1;
  } while (cursor !== null && pages < 10);
  t.equal(pages, 3, '7 entries in pages of 3');
  t.same(seen, [...mine].reverse(), 'each entry once, newest first');

  for (const limit of ['0', '101', 'x']) {
    const res = await list(auditKey.key, `?limit=${limit}`);
    t.equal(res.status, 400, `limit=${limit}: 400`);
    t.match(res.body.error.details, [{ path: '/query/limit' }]);
  }
  const badCursor = await list(auditKey.key, '?cursor=bm9wZQ');
  t.equal(badCursor.status, 400, 'an altered cursor: 400');
  t.match(badCursor.body.error.details, [{ path: '/query/cursor' }]);
  const badAction = await list(auditKey.key, '?action=nope');
  t.equal(badAction.status, 400, 'an unknown action: 400');
  t.match(badAction.body.error.details, [{ path: '/query/action' }]);
});

t.test('changes made with a key are recorded with the key as the actor', async (t) => {
  const writer = await keyOf(dev.appId, 'sandbox', 'read webhooks:write searches');
  const ua = { 'user-agent': 'audit-test/1.0' };
  const url = 'https://93.184.215.14/hooks/audited';
  const created = await api(app, 'POST', '/api/v1/webhook_endpoints', writer.key, { url }, ua);
  t.equal(created.status, 201);
  const { id, secret } = created.body.data as { id: string; secret: string };
  const patched = await api(
    app,
    'PATCH',
    `/api/v1/webhook_endpoints/${id}`,
    writer.key,
    { enabled_events: ['listing.created'], disabled: true },
    ua,
  );
  t.equal(patched.status, 200);
  const refused = await api(app, 'DELETE', `/api/v1/webhook_endpoints/${id}`, auditKey.key);
  t.equal(refused.status, 403, 'a refused change');
  t.equal((await api(app, 'DELETE', `/api/v1/webhook_endpoints/${id}`, writer.key)).status, 204);
  const saved = await api(app, 'POST', '/api/v1/saved_searches', writer.key, {
    name: 'coats',
    q: 'coat',
  });
  t.equal(saved.status, 201);
  const savedId = saved.body.data.id as string;
  t.equal((await api(app, 'DELETE', `/api/v1/saved_searches/${savedId}`, writer.key)).status, 204);

  const res = await list(auditKey.key, `?actor=${writer.id}`);
  t.equal(res.status, 200);
  t.same(
    res.body.data.map((e: Json) => [e.action, e.target]),
    [
      ['saved_search.deleted', savedId],
      ['endpoint.deleted', id],
      ['endpoint.disabled', id],
      ['endpoint.updated', id],
      ['endpoint.created', id],
    ],
    'each change once, newest first; the refused delete is not there',
  );
  for (const entry of res.body.data)
    t.match(entry.actor, { type: 'api_key', id: writer.id, name: null }, entry.action);
  t.match(res.body.data.at(-1), {
    details: { environment: 'sandbox', url, enabled_events: ['*'] },
    ip: /\d/,
    user_agent: 'audit-test/1.0',
  });
  t.notMatch(JSON.stringify(res.body), secret, 'no secret in the log');
  t.notMatch(JSON.stringify(res.body), /svc_/, 'no credential in the log');
  const byAction = await list(auditKey.key, '?action=endpoint.created');
  t.same(
    byAction.body.data.map((e: Json) => e.target),
    [id],
    'filtered by action',
  );
  const theirs = await list(otherKey.key, `?actor=${writer.id}`);
  t.same(theirs.body.data, [], "another app's key sees none of it");
});

t.test('the portal offers audit:read to those who may read the log', async (t) => {
  const owner = await signUp(app);
  const appId = await createApp(owner, 'Audit keys');
  const developer = await signUp(app);
  const flags = { app: appId, username: developer.username, role: 'developer' };
  await COMMANDS['app member add']!.run(
    app.services,
    new Map(Object.entries(flags).map(([k, v]) => [k, [v]])),
  );
  const keysUrl = `/portal/apps/${appId}/keys`;
  const form = await owner.browser.get(keysUrl);
  t.match(form.body, /name="scopes" value="audit:read"/, 'the key form offers audit:read');
  t.notMatch(form.body, /value="audit:read" checked/, 'not ticked by default');

  const before = (await app.services.audit.page(appId, {})).entries.length;
  const refused = await developer.browser.act(keysUrl, keysUrl, {
    env: 'sandbox',
    scopes: ['audit:read'],
  });
  t.equal(refused.statusCode, 403, "a developer's sandbox key cannot read the log");
  t.equal((await app.services.audit.page(appId, {})).entries.length, before, 'nothing recorded');
  t.ok(
    await createKeyInPortal(developer, appId, { scopes: ['read'] }),
    'their other sandbox keys are made',
  );

  const key = await createKeyInPortal(owner, appId, { scopes: ['audit:read'] });
  const res = await list(key);
  t.equal(res.status, 200, "the owner's key reads the log");
  t.match(res.body.data[0], {
    action: 'key.created',
    actor: { type: 'user', name: owner.username },
    details: { environment: 'sandbox', scopes: ['audit:read'] },
  });
});
