/**
 * OAuth access tokens held between requests like API keys (src/apps/key-cache.ts,
 * docs/operations.md): a token in use costs no lookup per request, and nothing that stops a
 * token is delayed by it. The triggers of drizzle/0009 announce every such change at commit,
 * whoever makes it (here a second set of services on the same database stands for the CLI or
 * another instance); this server's own revocations drop the token at once. On PostgreSQL and on
 * the embedded database alike.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { createServices } from '../../src/services.ts';
import { bearer, listenToCredentialChanges, revokeUnannounced } from '../helpers/accounts.ts';
import { waitUntil } from '../helpers/wait.ts';
import { listingsApp } from '../listings/support.ts';
import { createClient, createEndUser, type Client, type EndUser } from './support.ts';

const app = await listingsApp(t);
const elsewhere = createServices(app.db);
const heard = await listenToCredentialChanges(app);
const getMe = (token: string) =>
  app.inject({ method: 'GET', url: '/api/v1/me', headers: bearer(token) });
const me = async (token: string) => (await getMe(token)).statusCode;

/** A user's authorization of a client, exchanged for tokens through the service. */
async function authorized(client?: Client, user?: EndUser) {
  client ??= await createClient(app);
  user ??= await createEndUser(app);
  const code = await app.services.oauth.issueCode({
    clientId: client.clientId,
    userId: user.id,
    redirectUri: client.redirectUri,
    scopes: ['read'],
    codeChallenge: null,
  });
  const tokens = await app.services.oauth.exchangeCode({
    clientId: client.clientId,
    code,
    redirectUri: client.redirectUri,
    codeVerifier: undefined,
  });
  return { client, user, code, ...tokens };
}

const tokenId = async (token: string) => {
  const [row] = await queryRows<{ id: string }>(
    app.db,
    sql`select id from oauth_tokens where token_hash = ${hashSecret(token)}`,
  );
  return row!.id;
};

await waitUntil('the server to hear credential changes', () => app.services.oauth.held.active);

t.test('a token in use is held: a change that bypasses the triggers is not seen', async (t) => {
  const { accessToken } = await authorized();
  // Held while heartbeats are heard (a loaded machine can miss the second they are given).
  const active = () => app.services.oauth.held.active;
  await waitUntil(
    'the token held',
    async () => active() && (await me(accessToken)) === 200 && active(),
  );
  await revokeUnannounced(app, 'oauth_tokens', await tokenId(accessToken));
  await waitUntil('heartbeats heard', active);
  t.equal(await me(accessToken), 200, 'answered from what the server holds');
  app.services.oauth.held.invalidate();
  t.equal(await me(accessToken), 401, 'read again: revoked');
});

t.test('what notifies: an access token or a grant stopped; not a refresh', async (t) => {
  const first = await authorized();
  const before = heard.count();
  const refreshed = await app.services.oauth.refresh({
    clientId: first.client.clientId,
    refreshToken: first.refreshToken,
    scopes: undefined,
  });
  await heard.settle();
  t.equal(heard.count(), before, 'a refresh (the old refresh token rotated): nothing');
  t.equal(await me(first.accessToken), 200, 'the access token of before the refresh still works');

  await app.db.execute(
    sql`update oauth_tokens set revoked_at = now() where id = ${await tokenId(first.accessToken)}`,
  );
  await waitUntil('an access token revoked', async () => heard.count() === before + 1, {
    timeoutMs: 2_000,
    everyMs: 2,
  });
  t.pass('an access token revoked');
  await app.db.execute(
    sql`update oauth_grants set revoked_at = now()
        where id = (select grant_id from oauth_tokens where id = ${await tokenId(refreshed.accessToken)})`,
  );
  await waitUntil('a grant revoked', async () => heard.count() === before + 2, {
    timeoutMs: 2_000,
    everyMs: 2,
  });
  t.pass('a grant revoked');

  const other = await authorized();
  await app.db.execute(
    sql`delete from oauth_grants
        where id = (select grant_id from oauth_tokens where id = ${await tokenId(other.accessToken)})`,
  );
  await waitUntil('a grant deleted (its tokens with it)', async () => heard.count() >= before + 3, {
    timeoutMs: 2_000,
    everyMs: 2,
  });
  t.pass('a grant deleted (its tokens with it)');
  t.equal(await me(other.accessToken), 401, 'and its token is refused');
});

t.test('revoked through this server: refused on the very next request', async (t) => {
  const { client, accessToken } = await authorized();
  t.equal(await me(accessToken), 200);
  await app.services.oauth.revokeToken(client.clientId, accessToken);
  t.equal(await me(accessToken), 401, 'RFC 7009 revocation of the access token');

  const signedOut = await authorized();
  t.equal(await me(signedOut.accessToken), 200);
  await app.services.oauth.revokeApp(signedOut.user.id, signedOut.client.clientId);
  t.equal(await me(signedOut.accessToken), 401, 'the user signs the app out');

  const reused = await authorized();
  t.equal(await me(reused.accessToken), 200);
  const refresh = () =>
    app.services.oauth.refresh({
      clientId: reused.client.clientId,
      refreshToken: reused.refreshToken,
      scopes: undefined,
    });
  const next = await refresh();
  t.equal(await me(next.accessToken), 200);
  await t.rejects(refresh(), 'the refresh token used twice');
  t.equal(await me(next.accessToken), 401, 'reuse revokes every token of the authorization');
  t.equal(await me(reused.accessToken), 401);

  const replayed = await authorized();
  t.equal(await me(replayed.accessToken), 200);
  await t.rejects(
    app.services.oauth.exchangeCode({
      clientId: replayed.client.clientId,
      code: replayed.code,
      redirectUri: replayed.client.redirectUri,
      codeVerifier: undefined,
    }),
    'the code exchanged twice',
  );
  t.equal(await me(replayed.accessToken), 401, 'a replayed code revokes what it issued');
});

t.test('revoked by another process: refused as soon as the change is heard', async (t) => {
  const { client, user, accessToken } = await authorized();
  t.equal(await me(accessToken), 200);
  await elsewhere.oauth.revokeToken(client.clientId, accessToken);
  await waitUntil('refused after a revoke elsewhere', async () => (await me(accessToken)) === 401, {
    timeoutMs: 2_000,
    everyMs: 2,
  });
  t.pass('refused after a revoke elsewhere');

  const again = await authorized(client, user);
  t.equal(await me(again.accessToken), 200);
  await elsewhere.oauth.revokeApp(user.id, client.clientId);
  await waitUntil(
    'refused after the user signs the app out elsewhere',
    async () => (await me(again.accessToken)) === 401,
    { timeoutMs: 2_000, everyMs: 2 },
  );
  t.pass('refused after the user signs the app out elsewhere');
});

t.test('its app deleted, here or elsewhere: refused', async (t) => {
  const here = await authorized();
  const there = await authorized();
  t.equal(await me(here.accessToken), 200);
  t.equal(await me(there.accessToken), 200);
  await app.services.apps.delete(here.client.clientId, here.client.name);
  t.equal(await me(here.accessToken), 401, 'deleted through this server: the next request');
  await elsewhere.apps.delete(there.client.clientId, there.client.name);
  await waitUntil('deleted elsewhere', async () => (await me(there.accessToken)) === 401, {
    timeoutMs: 2_000,
    everyMs: 2,
  });
  t.pass('deleted elsewhere');
});

t.test('two users of one app: each token is its own caller', async (t) => {
  const first = await authorized();
  const second = await authorized(first.client);
  for (let i = 0; i < 2; i += 1) {
    t.equal((await getMe(first.accessToken)).json().data.username, first.user.username);
    t.equal((await getMe(second.accessToken)).json().data.username, second.user.username);
  }
});
