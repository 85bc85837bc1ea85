/**
 * What members made stays the app's and is listed with who made it (issue #61, docs/portal.md
 * "Members and roles"): the Keys and Webhooks pages' "Made by" names the member who made a key
 * or an endpoint on the portal, "admin CLI" for the operator's, "an API key" for an endpoint
 * made through the API; a removed member's key keeps working and keeps their name.
 */
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { sql } from 'drizzle-orm';
import { api, startReceiver } from '../webhooks/support.ts';
import {
  adminCli,
  appWithLog,
  cellUnder,
  createApp,
  createKeyInPortal,
  signUp,
  type PortalUser,
} from './support.ts';

const { app } = await appWithLog(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const receiver = await startReceiver(t);
receiver.reply = () => ({ status: 200 });
const holder = await signUp(app);
const developer = await signUp(app);
const appId = await createApp(holder);
await app.services.apps.addMember(
  appId,
  { username: developer.username, role: 'developer' },
  'admin_cli',
);
const keysUrl = `/portal/apps/${appId}/keys`;
const webhooksUrl = `/portal/apps/${appId}/webhooks`;

const addEndpoint = async (user: PortalUser, url: string) => {
  const res = await user.browser.act(webhooksUrl, webhooksUrl, { env: 'sandbox', url });
  if (res.statusCode !== 201) throw new Error(`endpoint not created: ${res.statusCode}`);
};
const madeBy = async (pageUrl: string, rowText: string) =>
  cellUnder((await holder.browser.get(pageUrl)).body, rowText, 'Made by');

const devKey = await createKeyInPortal(developer, appId, {
  name: 'Dev sync',
  scopes: ['read', 'webhooks:write'],
});
await createKeyInPortal(holder, appId, { name: 'Holder sync' });
await adminCli(app, 'key create', { app: appId, env: 'sandbox', name: 'Operator key' });
const devEndpoint = receiver.url('/made-by-developer');
await addEndpoint(developer, devEndpoint);
const cliEndpoint = receiver.url('/made-by-cli');
await adminCli(app, 'webhook create', { app: appId, env: 'sandbox', url: cliEndpoint });
const apiEndpoint = receiver.url('/made-by-key');
const viaApi = await api(app, 'POST', '/api/v1/webhook_endpoints', devKey, { url: apiEndpoint });

t.test('each key and endpoint is listed with who made it', async (t) => {
  t.equal(viaApi.status, 201, 'an endpoint made through the API with a key');
  t.equal(await madeBy(keysUrl, 'Dev sync'), developer.username);
  t.equal(await madeBy(keysUrl, 'Holder sync'), holder.username);
  t.equal(await madeBy(keysUrl, 'Operator key'), 'admin CLI');
  t.equal(await madeBy(webhooksUrl, devEndpoint), developer.username);
  t.equal(await madeBy(webhooksUrl, cliEndpoint), 'admin CLI');
  t.equal(await madeBy(webhooksUrl, apiEndpoint), 'an API key', 'a key names no person');
  const [row] = await queryRows<{ created_by: string | null; created_via: string }>(
    app.db,
    sql`select k.created_by, k.created_via from api_keys k join users u on u.id = k.created_by
        where k.app_id = ${appId} and u.username = ${developer.username}`,
  );
  t.equal(row?.created_via, 'portal', 'created_by is the signed-in member, made on the portal');
});

t.test('a rolled key is made by whoever rolled it', async (t) => {
  const [key] = await queryRows<{ id: string }>(
    app.db,
    sql`select id from api_keys where app_id = ${appId} and name = 'Holder sync'`,
  );
  const res = await developer.browser.act(`${keysUrl}/${key!.id}`, `${keysUrl}/${key!.id}/roll`, {
    expires_in: '1h',
  });
  t.equal(res.statusCode, 201);
  const makers = await queryRows<{ username: string | null }>(
    app.db,
    sql`select u.username from api_keys k left join users u on u.id = k.created_by
        where k.app_id = ${appId} and k.name = 'Holder sync' order by k.created_at`,
  );
  t.same(
    makers.map((m) => m.username),
    [holder.username, developer.username],
  );
});

t.test(
  'a removed member loses access; what they made stays, works and keeps their name',
  async (t) => {
    await app.services.apps.removeMember(appId, developer.username, 'admin_cli');
    t.equal((await developer.browser.get(keysUrl)).statusCode, 404, 'their access ends at once');
    const me = await api(app, 'GET', '/api/v1/me', devKey);
    t.equal(me.status, 200, 'their key still works');
    t.equal(me.body.data.username, holder.username, 'as the account holder, as every app key does');
    t.equal(await madeBy(keysUrl, 'Dev sync'), developer.username, 'still listed with their name');
    t.equal(await madeBy(webhooksUrl, devEndpoint), developer.username);
    const endpoints = await api(app, 'GET', '/api/v1/webhook_endpoints', devKey);
    t.ok(
      endpoints.body.data.some((e: { url: string }) => e.url === devEndpoint),
      'their endpoint is still the app’s',
    );
  },
);
