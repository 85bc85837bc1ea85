// POST /oauth/token and POST /oauth/revoke: every error branch in the RFC 6749 §5.2 format,
// the code's one-time use and bindings (client, redirect URI, PKCE challenge), then what the
// tokens can do on the API and userinfo, and the authorized-apps page that revokes them.
import { eq } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { oauthCodes, oauthTokens } from '../../src/db/schema.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { bearer, createDeveloper, createKey, keyChangeHeard } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser, csrfOf } from '../helpers/browser.ts';
import {
  basicAuth,
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  s256,
  tokenRequest,
} from './support.ts';

const app = await buildTestApp(t);
const client = await createClient(app);
const otherClient = await createClient(app, 'https://other.example.com/cb');
const user = await createEndUser(app);
const browser = new Browser(app);

type Res = Awaited<ReturnType<typeof tokenRequest>>;

function assertOAuthError(t: Test, res: Res, status: number, error: string, label: string) {
  t.equal(res.statusCode, status, `${label}: ${status}`);
  const body = res.json();
  t.equal(body.error, error, `${label}: error=${error}`);
  t.type(body.error_description, 'string', `${label}: error_description`);
  t.notOk(body.meta, `${label}: not the API envelope`);
  t.equal(res.headers['cache-control'], 'no-store', `${label}: Cache-Control no-store`);
  t.equal(res.headers['pragma'], 'no-cache', `${label}: Pragma no-cache`);
}

const me = (token: string) =>
  app.inject({ method: 'GET', url: '/api/v1/me', headers: bearer(token) });

t.test('client authentication', async (t) => {
  const code = await obtainCode(browser, client, user);
  const grant = { grant_type: 'authorization_code', code, redirect_uri: client.redirectUri };

  let res = await tokenRequest(app, {
    ...grant,
    client_id: client.clientId,
    client_secret: `${client.clientSecret}x`,
  });
  assertOAuthError(t, res, 401, 'invalid_client', 'wrong secret (client_secret_post)');
  t.notOk(res.headers['www-authenticate'], 'no Basic challenge when Basic was not used');

  res = await tokenRequest(app, grant, basicAuth(client.clientId, 'svc_cs_wrong'));
  assertOAuthError(t, res, 401, 'invalid_client', 'wrong secret (client_secret_basic)');
  t.equal(res.headers['www-authenticate'], 'Basic realm="oauth"', 'a Basic challenge');

  res = await tokenRequest(app, {
    ...grant,
    client_id: '00000000-0000-4000-8000-000000000000',
    client_secret: client.clientSecret,
  });
  assertOAuthError(t, res, 401, 'invalid_client', 'unknown client');

  res = await tokenRequest(app, {
    ...grant,
    client_id: 'not-a-uuid',
    client_secret: client.clientSecret,
  });
  assertOAuthError(t, res, 401, 'invalid_client', 'client_id that is not a UUID');

  res = await tokenRequest(app, { ...grant, client_id: client.clientId });
  assertOAuthError(t, res, 401, 'invalid_client', 'no secret');

  res = await tokenRequest(app, grant, { authorization: 'Basic !!!' });
  assertOAuthError(t, res, 401, 'invalid_client', 'malformed Basic header');

  res = await tokenRequest(
    app,
    { ...grant, client_secret: client.clientSecret },
    basicAuth(client.clientId, client.clientSecret),
  );
  assertOAuthError(t, res, 400, 'invalid_request', 'two authentication methods at once');

  // None of these consumed the code.
  res = await tokenRequest(app, grant, basicAuth(client.clientId, client.clientSecret));
  t.equal(res.statusCode, 200, 'the right credentials still get the token');
});

t.test('request errors', async (t) => {
  const auth = { client_id: client.clientId, client_secret: client.clientSecret };
  let res = await tokenRequest(app, {
    grant_type: 'password',
    username: 'u',
    password: 'p',
    ...auth,
  });
  assertOAuthError(t, res, 400, 'unsupported_grant_type', 'grant_type=password');
  res = await tokenRequest(app, { grant_type: 'client_credentials', ...auth });
  assertOAuthError(t, res, 400, 'unsupported_grant_type', 'grant_type=client_credentials');
  res = await tokenRequest(app, { ...auth, code: 'svc_ac_x', redirect_uri: client.redirectUri });
  assertOAuthError(t, res, 400, 'invalid_request', 'missing grant_type');
  res = await tokenRequest(app, {
    grant_type: 'authorization_code',
    redirect_uri: client.redirectUri,
    ...auth,
  });
  assertOAuthError(t, res, 400, 'invalid_request', 'missing code');
  res = await tokenRequest(app, { grant_type: 'authorization_code', code: 'svc_ac_x', ...auth });
  assertOAuthError(t, res, 400, 'invalid_request', 'missing redirect_uri');
  res = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `grant_type=authorization_code&grant_type=authorization_code&code=svc_ac_x&redirect_uri=x&client_id=${client.clientId}&client_secret=${client.clientSecret}`,
  });
  assertOAuthError(t, res, 400, 'invalid_request', 'a repeated parameter');
  res = await tokenRequest(app, {
    grant_type: 'authorization_code',
    code: 'svc_ac_x',
    redirect_uri: client.redirectUri,
    code_verifier: 'short',
    ...auth,
  });
  assertOAuthError(t, res, 400, 'invalid_request', 'malformed code_verifier');
  res = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    payload: {
      grant_type: 'authorization_code',
      code: 'svc_ac_x',
      redirect_uri: client.redirectUri,
      ...auth,
    },
  });
  assertOAuthError(t, res, 400, 'invalid_request', 'a JSON body');
  res = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'text/plain' },
    payload: 'grant_type=authorization_code',
  });
  assertOAuthError(t, res, 400, 'invalid_request', 'a text/plain body');
  res = await tokenRequest(app, {
    grant_type: 'authorization_code',
    code: 'svc_ac_unknown',
    redirect_uri: client.redirectUri,
    ...auth,
  });
  assertOAuthError(t, res, 400, 'invalid_grant', 'an unknown code');
});

t.test('the code is bound to its client and redirect URI, and expires', async (t) => {
  const code = await obtainCode(browser, client, user);
  let res = await tokenRequest(app, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    client_id: otherClient.clientId,
    client_secret: otherClient.clientSecret,
  });
  assertOAuthError(t, res, 400, 'invalid_grant', 'a code of another client');
  res = await exchange(app, client, code, { redirect_uri: 'https://client.example.com/other' });
  assertOAuthError(t, res, 400, 'invalid_grant', 'another redirect_uri');
  t.equal(
    (await exchange(app, client, code)).statusCode,
    200,
    'the code still works for its own client and URI',
  );

  const expiring = await obtainCode(browser, client, user);
  await app.db
    .update(oauthCodes)
    .set({ expiresAt: new Date(Date.now() - 1000) })
    .where(eq(oauthCodes.codeHash, hashSecret(expiring)));
  assertOAuthError(
    t,
    await exchange(app, client, expiring),
    400,
    'invalid_grant',
    'an expired code',
  );

  const [row] = await app.db
    .select()
    .from(oauthCodes)
    .where(eq(oauthCodes.codeHash, hashSecret(code)));
  t.ok(row, 'codes are stored by hash');
  const stored = await app.db
    .select({ n: oauthCodes.codeHash })
    .from(oauthCodes)
    .where(eq(oauthCodes.codeHash, code));
  t.equal(stored.length, 0, 'never in clear');
  const lifetime = (row!.expiresAt.getTime() - row!.createdAt.getTime()) / 1000;
  t.ok(lifetime > 590 && lifetime <= 600, 'codes live 10 minutes');
});

t.test('a replayed code is refused and revokes the tokens issued from it', async (t) => {
  const code = await obtainCode(browser, client, user);
  const first = await exchange(app, client, code);
  t.equal(first.statusCode, 200);
  const token = first.json().access_token as string;
  t.equal((await me(token)).statusCode, 200, 'the token works');

  assertOAuthError(t, await exchange(app, client, code), 400, 'invalid_grant', 'the replay');
  const after = await me(token);
  t.equal(after.statusCode, 401, 'the token issued from the code is revoked');
  t.equal(after.json().error.code, 'unauthorized');
  assertOAuthError(
    t,
    await exchange(app, client, code),
    400,
    'invalid_grant',
    'and any later replay',
  );
});

t.test('PKCE: S256 checked, and no downgrade either way', async (t) => {
  const verifier = 'v'.repeat(20) + 'A-B.C_D~E'.repeat(4);
  const withChallenge = await obtainCode(browser, client, user, {
    code_challenge: s256(verifier),
    code_challenge_method: 'S256',
  });
  assertOAuthError(
    t,
    await exchange(app, client, withChallenge),
    400,
    'invalid_grant',
    'challenge sent, no verifier',
  );
  assertOAuthError(
    t,
    await exchange(app, client, withChallenge, { code_verifier: 'w'.repeat(43) }),
    400,
    'invalid_grant',
    'a wrong verifier',
  );
  const ok = await exchange(app, client, withChallenge, { code_verifier: verifier });
  t.equal(ok.statusCode, 200, 'the right verifier');

  const without = await obtainCode(browser, client, user);
  assertOAuthError(
    t,
    await exchange(app, client, without, { code_verifier: verifier }),
    400,
    'invalid_grant',
    'a verifier for a code issued without challenge',
  );
  t.equal((await exchange(app, client, without)).statusCode, 200, 'without a verifier it works');
});

t.test('tokens: stored hashed, 30 days, live, scopes enforced, expiry', async (t) => {
  const code = await obtainCode(browser, client, user, { scope: 'listings:write' });
  const res = await exchange(app, client, code);
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.equal(body.scope, 'listings:write');
  t.equal(body.expires_in, 2592000);
  const [row] = await app.db
    .select()
    .from(oauthTokens)
    .where(eq(oauthTokens.tokenHash, hashSecret(body.access_token)));
  t.ok(row, 'the token is stored by its hash');
  t.equal(row!.codeHash, hashSecret(code), 'with the code it came from');
  const days = (row!.expiresAt.getTime() - row!.createdAt.getTime()) / 86_400_000;
  t.ok(days > 29.99 && days <= 30, '30 days');

  const info = await app.inject({
    method: 'GET',
    url: '/oauth/userinfo',
    headers: bearer(body.access_token),
  });
  t.equal(info.statusCode, 403, 'userinfo needs read: 403');
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(body.access_token),
    payload: { title: 'Write only token', price_cents: 500 },
  });
  t.equal(created.statusCode, 201, 'listings:write works');
  t.equal(created.json().data.seller.id, user.id);

  // Expired by hand, as another process would: the server holds the token until it hears the
  // change (drizzle/0009), milliseconds after the commit.
  await keyChangeHeard(app, () =>
    app.db
      .update(oauthTokens)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(oauthTokens.id, row!.id)),
  );
  const expired = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(body.access_token),
    payload: { title: 'Too late', price_cents: 500 },
  });
  t.equal(expired.statusCode, 401, 'an expired token: 401');
  t.equal(
    (
      await app.inject({
        method: 'GET',
        url: '/api/v1/listings',
        headers: bearer(body.access_token),
      })
    ).statusCode,
    401,
    'also on a public read',
  );
  t.equal((await me(`svc_oauth_${'Q'.repeat(43)}`)).statusCode, 401, 'an unknown token: 401');
});

t.test('userinfo: an OAuth token with read, never an API key', async (t) => {
  const token = (await exchange(app, client, await obtainCode(browser, client, user))).json()
    .access_token as string;
  const ok = await app.inject({ method: 'GET', url: '/oauth/userinfo', headers: bearer(token) });
  t.equal(ok.statusCode, 200);
  t.equal(ok.json().data.email, user.email, 'email present');
  t.equal(ok.json().data.username, user.username);

  const key = await createKey(app, await createDeveloper(app), 'live');
  const withKey = await app.inject({ method: 'GET', url: '/oauth/userinfo', headers: bearer(key) });
  t.equal(withKey.statusCode, 403, 'an API key: 403');
  t.equal(withKey.json().error.code, 'forbidden');
  const anonymous = await app.inject({ method: 'GET', url: '/oauth/userinfo' });
  t.equal(anonymous.statusCode, 401, 'no credential: 401');
});

t.test('revocation (RFC 7009)', async (t) => {
  const token = (await exchange(app, client, await obtainCode(browser, client, user))).json()
    .access_token as string;
  const revoke = (form: Record<string, string>, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: new URLSearchParams(form).toString(),
    });

  assertOAuthError(
    t,
    await revoke({ token, client_id: client.clientId, client_secret: 'svc_cs_nope' }),
    401,
    'invalid_client',
    'wrong secret',
  );
  assertOAuthError(
    t,
    await revoke({ client_id: client.clientId, client_secret: client.clientSecret }),
    400,
    'invalid_request',
    'no token',
  );

  const foreign = await revoke({
    token,
    client_id: otherClient.clientId,
    client_secret: otherClient.clientSecret,
  });
  t.equal(foreign.statusCode, 200, "another client's token: 200, says nothing");
  t.equal((await me(token)).statusCode, 200, 'and leaves it alone');

  const unknown = await revoke({
    token: `svc_oauth_${'Z'.repeat(43)}`,
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });
  t.equal(unknown.statusCode, 200, 'an unknown token: 200');
  const apiKey = await revoke({
    token: 'svc_live_something',
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });
  t.equal(apiKey.statusCode, 200, 'not an access token: 200, nothing done');

  const done = await revoke(
    { token, token_type_hint: 'access_token' },
    basicAuth(client.clientId, client.clientSecret),
  );
  t.equal(done.statusCode, 200, 'revoked');
  t.match(done.headers['content-type'], /^application\/json/);
  t.strictSame(done.json(), {}, 'an empty JSON object');
  t.equal(done.headers['cache-control'], 'no-store');
  t.equal((await me(token)).statusCode, 401, 'then the token is 401');
  t.equal(
    (await revoke({ token, client_id: client.clientId, client_secret: client.clientSecret }))
      .statusCode,
    200,
    'revoking again: 200',
  );
});

t.test('the authorized-apps page lists the apps and removes their access', async (t) => {
  const person = await createEndUser(app);
  const web = new Browser(app);
  const issuedA = (
    await exchange(
      app,
      client,
      await obtainCode(web, client, person, { scope: 'read listings:write' }),
    )
  ).json();
  const tokenA = issuedA.access_token as string;
  const tokenB = (
    await exchange(app, otherClient, await obtainCode(web, otherClient, person))
  ).json().access_token as string;

  const anonymous = await new Browser(app).get('/account/apps');
  t.equal(anonymous.statusCode, 303, 'not signed in: to the sign-in page');
  t.equal(anonymous.headers.location, '/login?return_to=%2Faccount%2Fapps');

  const page = await web.get('/account/apps');
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-security-policy'], /frame-ancestors 'none'/);
  t.match(page.body, client.name, 'lists the first app');
  t.match(page.body, otherClient.name, 'lists the second app');
  t.match(page.body, `@${client.ownerUsername}`, 'with its owner');
  t.match(page.body, /Create, edit and archive listings/, 'and what it may do');

  const refused = await web.post('/account/apps/revoke', { app_id: client.clientId });
  t.equal(refused.statusCode, 403, 'without a CSRF token: 403');
  t.equal((await me(tokenA)).statusCode, 200, 'nothing revoked');

  const removed = await web.post('/account/apps/revoke', {
    app_id: client.clientId,
    csrf_token: csrfOf(page.body),
  });
  t.equal(removed.statusCode, 303);
  t.equal(removed.headers.location, '/account/apps?revoked=1');
  t.equal((await me(tokenA)).statusCode, 401, "the app's token stops working");
  const refreshed = await tokenRequest(app, {
    grant_type: 'refresh_token',
    refresh_token: issuedA.refresh_token,
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });
  t.equal(refreshed.json().error, 'invalid_grant', 'and so does its refresh token');
  t.equal((await me(tokenB)).statusCode, 200, "the other app's token still works");

  const after = await web.get('/account/apps?revoked=1');
  t.notMatch(after.body, client.name, 'the app is gone from the list');
  t.match(after.body, otherClient.name);
  t.match(after.body, /access was removed/);
});
