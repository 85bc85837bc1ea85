/**
 * An app's settings page (docs/portal.md): rename, and delete with the app's name typed as
 * confirmation. Before the deletion a key, an OAuth access token, a refresh token, the client
 * secret and a webhook endpoint all work; afterwards none does, and the app is gone from the
 * portal and the CLI. A wrong confirmation deletes nothing. The CLI's `app rename` and
 * `app delete` are the same service calls, with the same words.
 */
import t from 'tap';
import { Browser } from '../helpers/browser.ts';
import { createEndUser, exchange, obtainCode, tokenRequest } from '../oauth/support.ts';
import { startReceiver } from '../webhooks/support.ts';
import {
  adminCli,
  alertOf,
  appWithLog,
  createApp,
  noticeOf,
  shownSecret,
  signUp,
} from './support.ts';

const { app } = await appWithLog(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const receiver = await startReceiver(t);
const owner = await signUp(app);
const endUser = await createEndUser(app);

const run = (command: string, flags: Record<string, string>) => adminCli(app, command, flags);

const me = (token: string) =>
  app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${token}` } });

/** An app with one of everything: a key, OAuth tokens of a user, a client secret, an endpoint. */
async function appWithEverything(name: string) {
  const appId = await createApp(owner, name);
  const keys = `/portal/apps/${appId}/keys`;
  const keyPage = await owner.browser.act(keys, keys, {
    env: 'sandbox',
    scopes: ['read', 'listings:write'],
    name: 'Main',
  });
  const key = shownSecret(keyPage.body, 'new-key')!;
  const redirectUri = 'https://client.example.com/callback';
  await app.services.apps.addRedirectUri(appId, redirectUri);
  const { client_secret } = await app.services.apps.rotateClientSecret(appId);
  const client = {
    clientId: appId,
    clientSecret: client_secret,
    redirectUri,
    ownerUsername: owner.username,
    name,
  };
  const code = await obtainCode(new Browser(app), client, endUser, { scope: 'read' });
  const tokens = JSON.parse((await exchange(app, client, code)).body) as {
    access_token: string;
    refresh_token: string;
  };
  const endpoint = await app.services.endpoints.create({
    appId,
    env: 'sandbox',
    url: receiver.url(`/${appId}`),
  });
  return { appId, key, client, tokens, endpoint };
}

const refresh = (client: { clientId: string; clientSecret: string }, refreshToken: string) =>
  tokenRequest(app, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });

t.test('rename: on the settings page and with the CLI, with the same rules', async (t) => {
  const appId = await createApp(owner, 'First name');
  const url = `/portal/apps/${appId}/settings`;
  const renamed = await owner.browser.act(url, `${url}/name`, { name: '  Second name ' });
  t.equal(renamed.statusCode, 303);
  const page = await owner.browser.get(String(renamed.headers.location));
  t.equal(noticeOf(page.body), 'The app was renamed.');
  t.match(page.body, /<h1>Second name<\/h1>/);

  const empty = await owner.browser.act(url, `${url}/name`, { name: ' ' });
  t.equal(empty.statusCode, 400);
  const cliWords = await run('app rename', { app: appId, name: ' ' }).catch(
    (e: Error) => e.message,
  );
  t.equal(alertOf(empty.body), cliWords, "the page refuses in the CLI's words");
  t.same(await run('app rename', { app: appId, name: 'Third name' }), {
    id: appId,
    name: 'Third name',
  });
  t.match((await owner.browser.get(url)).body, /<h1>Third name<\/h1>/);
});

t.test('delete: a wrong confirmation deletes nothing', async (t) => {
  const it = await appWithEverything('Keep me');
  const url = `/portal/apps/${it.appId}/settings`;
  const wrong = await owner.browser.act(url, `${url}/delete`, { confirm: 'keep me' });
  t.equal(wrong.statusCode, 400);
  t.equal(alertOf(wrong.body), "Type the app's name, Keep me, to confirm. Nothing was deleted.");
  t.equal((await me(it.key)).statusCode, 200, 'the key still works');
  t.equal((await me(it.tokens.access_token)).statusCode, 200, 'the access token still works');
  t.ok((await app.services.endpoints.details(it.endpoint.id)).active, 'the endpoint is active');
  await t.rejects(run('app delete', { app: it.appId, confirm: 'Keep' }), {
    message: "Type the app's name, Keep me, to confirm. Nothing was deleted.",
  });
});

t.test('delete: nothing of the app keeps working', async (t) => {
  const it = await appWithEverything('Doomed app');
  t.equal((await me(it.key)).statusCode, 200, 'before: the key works');
  t.equal((await me(it.tokens.access_token)).statusCode, 200, 'before: the access token works');

  const url = `/portal/apps/${it.appId}/settings`;
  const deleted = await owner.browser.act(url, `${url}/delete`, { confirm: 'Doomed app' });
  t.equal(deleted.statusCode, 303);
  t.equal(deleted.headers.location, '/portal/apps?done=deleted');
  const list = await owner.browser.get('/portal/apps?done=deleted');
  t.match(noticeOf(list.body), /^The app was deleted\./);
  t.notMatch(list.body, /Doomed app/, 'gone from the list');
  t.equal((await owner.browser.get(`/portal/apps/${it.appId}`)).statusCode, 404);
  t.equal((await owner.browser.get(`/portal/apps/${it.appId}/keys`)).statusCode, 404);

  t.equal((await me(it.key)).statusCode, 401, 'the key answers 401');
  t.equal((await me(it.tokens.access_token)).statusCode, 401, 'the access token answers 401');
  const refreshed = await refresh(it.client, it.tokens.refresh_token);
  t.equal(refreshed.statusCode, 401, 'the client secret no longer authenticates');
  t.equal(JSON.parse(refreshed.body).error, 'invalid_client');
  const authorize = await new Browser(app).get(
    `/oauth/authorize?response_type=code&client_id=${it.appId}&redirect_uri=${encodeURIComponent(it.client.redirectUri)}&scope=read`,
  );
  t.equal(authorize.statusCode, 400, 'authorize: an unknown client');
  const endpoint = await app.services.endpoints.details(it.endpoint.id);
  t.equal(endpoint.active, false, 'the endpoint is disabled');
  t.equal(endpoint.disabled_reason, 'The app was deleted.');
  await t.rejects(run('app show', { app: it.appId }), { message: `No app with id ${it.appId}.` });
  await t.rejects(run('webhook enable', { id: it.endpoint.id }), {
    message: `No app with id ${it.appId}.`,
  });
  await t.rejects(run('key create', { app: it.appId, env: 'sandbox' }), {
    message: `No app with id ${it.appId}.`,
  });
});

t.test('the CLI deletes with the same confirmation', async (t) => {
  const it = await appWithEverything('CLI doomed');
  t.same(await run('app delete', { app: it.appId, confirm: 'CLI doomed' }), {
    id: it.appId,
    deleted: true,
  });
  t.equal((await me(it.key)).statusCode, 401);
  t.equal((await me(it.tokens.access_token)).statusCode, 401);
});

t.test("another user cannot see or delete the app's settings", async (t) => {
  const appId = await createApp(owner, 'Not yours');
  const stranger = await signUp(app);
  t.equal((await stranger.browser.get(`/portal/apps/${appId}/settings`)).statusCode, 404);
  await stranger.browser.get('/portal/apps');
  const res = await stranger.browser.submit(
    { confirm: 'Not yours' },
    `/portal/apps/${appId}/settings/delete`,
  );
  t.equal(res.statusCode, 404);
  t.ok(await app.services.apps.get(appId), 'still there');
});
