// Standard OAuth client libraries against a listening server. openid-client 6: discovery
// (RFC 8414), the code flow with PKCE S256 and state, userinfo (which it accepts only with a
// top-level string `sub` equal to the subject it expects), and revocation (RFC 7009).
// simple-oauth2 5: the code flow and revocation (it parses every answer as JSON, so an empty
// revocation body made it throw).
import * as client from 'openid-client';
import { AuthorizationCode } from 'simple-oauth2';
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { freePort } from '../helpers/processes.ts';
import { Browser } from '../helpers/browser.ts';
import { createClient, createEndUser, oauthErrorOf } from './support.ts';

// The issuer is BASE_URL, fixed at boot, and must equal the URL the client discovers.
const port = await freePort();
const baseUrl = `http://127.0.0.1:${port}`;
const app = await buildTestApp(t, { PORT: String(port), BASE_URL: baseUrl });
await app.listen({ host: '127.0.0.1', port });

const registered = await createClient(app, 'http://127.0.0.1/callback');
const user = await createEndUser(app);

// algorithm 'oauth2': /.well-known/oauth-authorization-server; plain http needs the opt-in.
const config = await client.discovery(
  new URL(baseUrl),
  registered.clientId,
  registered.clientSecret,
  undefined,
  {
    algorithm: 'oauth2',
    execute: [client.allowInsecureRequests],
  },
);

/**
 * What a web app does: authorization URL with PKCE and state, the user's browser, the code grant.
 */
async function signInWithCode(): Promise<string> {
  return (await codeGrant()).access_token;
}

async function codeGrant() {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: registered.redirectUri,
    scope: 'read listings:write',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  });
  const callback = await new Browser(app).authorize(url.pathname + url.search, user);
  return client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
  });
}

t.test('discovery reads the metadata document', async (t) => {
  const meta = config.serverMetadata();
  t.equal(meta.issuer, baseUrl);
  t.equal(meta.userinfo_endpoint, `${baseUrl}/oauth/userinfo`);
  t.equal(meta.revocation_endpoint, `${baseUrl}/oauth/revoke`);
  t.ok(meta.supportsPKCE('S256'), 'PKCE S256 is advertised');
  t.ok(meta.grant_types_supported?.includes('refresh_token'), 'refresh_token is advertised');
});

t.test(
  'code -> token -> refresh -> refresh; a reused refresh token revokes the grant',
  async (t) => {
    const first = await codeGrant();
    t.match(first.refresh_token, /^svc_rt_/, 'the code grant returns a refresh token');
    const second = await client.refreshTokenGrant(config, first.refresh_token!);
    const third = await client.refreshTokenGrant(config, second.refresh_token!, { scope: 'read' });
    t.equal(third.scope, 'read', 'a refresh can narrow the scope');
    t.equal(
      (await client.fetchUserInfo(config, third.access_token, user.id)).sub,
      user.id,
      'the refreshed token reads userinfo',
    );
    t.equal(
      await oauthErrorOf(client.refreshTokenGrant(config, second.refresh_token!)),
      'invalid_grant',
      'the rotated token is reuse',
    );
    for (const token of [first.access_token, second.access_token, third.access_token]) {
      const res = await fetch(`${baseUrl}/api/v1/me`, {
        headers: { authorization: `Bearer ${token}` },
      });
      t.equal(res.status, 401, 'every token of the grant is revoked');
    }
  },
);

t.test('code + PKCE, userinfo with sub, then revocation', async (t) => {
  const accessToken = await signInWithCode();
  t.match(accessToken, /^svc_oauth_/);

  const info = await client.fetchUserInfo(config, accessToken, user.id);
  t.equal(info.sub, user.id, 'sub is the user id');
  t.match(
    info,
    {
      data: { id: user.id, username: user.username, email: user.email },
      meta: { environment: 'live' },
    },
    'the envelope is still there',
  );

  // The library compares sub with the subject the app expects (the one it signed in).
  await t.rejects(
    client.fetchUserInfo(config, accessToken, '00000000-0000-4000-8000-000000000000'),
    { code: 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED' },
    'another subject is refused',
  );

  await client.tokenRevocation(config, accessToken);
  const after = await fetch(`${baseUrl}/api/v1/me`, {
    headers: { authorization: `Bearer ${accessToken}` },
  });
  t.equal(after.status, 401, 'the revoked token is 401 on /api/v1/me');
});

t.test('simple-oauth2: code flow, then revocation', async (t) => {
  const oauth2 = new AuthorizationCode({
    client: { id: registered.clientId, secret: registered.clientSecret },
    auth: {
      tokenHost: baseUrl,
      tokenPath: '/oauth/token',
      authorizePath: '/oauth/authorize',
      revokePath: '/oauth/revoke',
    },
  });
  const url = new URL(
    oauth2.authorizeURL({ redirect_uri: registered.redirectUri, scope: 'read', state: 'simple' }),
  );
  const callback = await new Browser(app).authorize(url.pathname + url.search, user);
  t.equal(callback.searchParams.get('state'), 'simple');
  const token = await oauth2.getToken({
    code: callback.searchParams.get('code') ?? '',
    redirect_uri: registered.redirectUri,
  });
  const accessToken = String(token.token.access_token);

  await t.resolves(token.revoke('access_token'), 'the revocation answer is JSON it can read');
  const after = await fetch(`${baseUrl}/api/v1/me`, {
    headers: { authorization: `Bearer ${accessToken}` },
  });
  t.equal(after.status, 401, 'the revoked token is 401 on /api/v1/me');
});
