// The authorization code flow end to end, driven by a real OAuth client library
// (oauth4webapi) over HTTP against a listening server: discovery, authorization with and
// without PKCE, the token request with client_secret_basic and client_secret_post, then the
// token on the API and userinfo, revocation (RFC 7009), and refresh tokens: rotation, reuse
// detection (RFC 9700 §4.14.2) and revocation of the whole authorization.
import { eq } from 'drizzle-orm';
import * as oauth from 'oauth4webapi';
import t, { type Test } from 'tap';
import { listings } from '../../src/db/schema.ts';
import { buildTestApp } from '../helpers/app.ts';
import { freePort } from '../helpers/processes.ts';
import { Browser } from '../helpers/browser.ts';
import { createClient, createEndUser, oauthErrorOf } from './support.ts';

/**
 * The issuer is BASE_URL, fixed at boot, and must equal the URL the client discovers, so the
 * OS picks a free port (port 0) first and the app is then configured for and listens on it.
 */
const port = await freePort();
const baseUrl = `http://127.0.0.1:${port}`;
const app = await buildTestApp(t, { PORT: String(port), BASE_URL: baseUrl });
await app.listen({ host: '127.0.0.1', port });

const insecure = { [oauth.allowInsecureRequests]: true } as const;
const issuer = new URL(baseUrl);
const client = await createClient(app, 'http://127.0.0.1/callback');
const user = await createEndUser(app);
const browser = new Browser(app);
const clientMeta: oauth.Client = { client_id: client.clientId };

const as = await oauth.processDiscoveryResponse(
  issuer,
  await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
);

t.test('the metadata document (RFC 8414)', async (t) => {
  t.equal(as.issuer, baseUrl, 'issuer is BASE_URL');
  t.equal(as.authorization_endpoint, `${baseUrl}/oauth/authorize`);
  t.equal(as.token_endpoint, `${baseUrl}/oauth/token`);
  t.equal(as.revocation_endpoint, `${baseUrl}/oauth/revoke`);
  t.equal(as.userinfo_endpoint, `${baseUrl}/oauth/userinfo`);
  t.strictSame(as.scopes_supported, ['read', 'listings:write', 'searches']);
  t.strictSame(as.response_types_supported, ['code']);
  t.strictSame(as.grant_types_supported, ['authorization_code', 'refresh_token']);
  t.strictSame(as.code_challenge_methods_supported, ['S256']);
  t.strictSame([...(as.token_endpoint_auth_methods_supported ?? [])].sort(), [
    'client_secret_basic',
    'client_secret_post',
  ]);
  t.strictSame([...(as.revocation_endpoint_auth_methods_supported ?? [])].sort(), [
    'client_secret_basic',
    'client_secret_post',
  ]);
  const res = await fetch(`${baseUrl}/.well-known/oauth-authorization-server`);
  t.match(res.headers.get('content-type'), /^application\/json/);
  t.ok(res.headers.get('x-request-id'), 'X-Request-Id');
});

interface FlowOptions {
  pkce: boolean;
  auth: 'client_secret_basic' | 'client_secret_post';
  scope: string;
}

/** What a client app does: authorization URL, callback validation, code exchange. */
async function runFlow(t: Test, options: FlowOptions): Promise<oauth.TokenEndpointResponse> {
  const state = oauth.generateRandomState();
  const verifier = options.pkce ? oauth.generateRandomCodeVerifier() : undefined;
  const url = new URL(as.authorization_endpoint!);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', client.clientId);
  url.searchParams.set('redirect_uri', client.redirectUri);
  url.searchParams.set('scope', options.scope);
  url.searchParams.set('state', state);
  if (verifier) {
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
  }

  // The user's browser: sign-in (once per browser session) and consent.
  const callback = await browser.authorize(url.pathname + url.search, user);
  t.equal(`${callback.origin}${callback.pathname}`, client.redirectUri, 'back at the redirect URI');
  t.match(callback.searchParams.get('code'), /^svc_ac_[A-Za-z0-9_-]{43}$/, 'a svc_ac_ code');

  const params = oauth.validateAuthResponse(as, clientMeta, callback, state);
  const clientAuth =
    options.auth === 'client_secret_basic'
      ? oauth.ClientSecretBasic(client.clientSecret)
      : oauth.ClientSecretPost(client.clientSecret);
  const response = await oauth.authorizationCodeGrantRequest(
    as,
    clientMeta,
    clientAuth,
    params,
    client.redirectUri,
    verifier ?? oauth.nopkce,
    insecure,
  );
  t.equal(
    response.headers.get('cache-control'),
    'no-store',
    'token response: Cache-Control no-store',
  );
  t.equal(response.headers.get('pragma'), 'no-cache', 'token response: Pragma no-cache');
  const result = await oauth.processAuthorizationCodeResponse(as, clientMeta, response);
  t.match(result.access_token, /^svc_oauth_[A-Za-z0-9_-]{43}$/, 'an opaque svc_oauth_ token');
  t.equal(result.token_type.toLowerCase(), 'bearer');
  t.equal(result.expires_in, 2_592_000, '30 days');
  t.equal(result.scope, options.scope, 'the granted scope');
  t.match(result.refresh_token, /^svc_rt_[A-Za-z0-9_-]{43}$/, 'an opaque svc_rt_ refresh token');
  return result;
}

const bearerCall = (token: string, method: string, path: string, body?: unknown) =>
  oauth.protectedResourceRequest(
    token,
    method,
    new URL(path, baseUrl),
    new Headers(body === undefined ? {} : { 'content-type': 'application/json' }),
    body === undefined ? null : JSON.stringify(body),
    insecure,
  );

/**
 * The same call with plain fetch, for answers oauth4webapi turns into exceptions (401/403
 * challenges).
 */
const rawCall = (token: string, method: string, path: string, body?: unknown) =>
  fetch(new URL(path, baseUrl), {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

for (const pkce of [true, false]) {
  for (const auth of ['client_secret_basic', 'client_secret_post'] as const) {
    t.test(`authorization code flow, ${pkce ? 'with' : 'without'} PKCE, ${auth}`, async (t) => {
      const { access_token } = await runFlow(t, { pkce, auth, scope: 'read listings:write' });
      const me = await bearerCall(access_token, 'GET', '/api/v1/me');
      t.equal(me.status, 200, '/api/v1/me with the token');
      t.equal((await me.json()).data.username, user.username, 'acts as the authorizing user');
    });
  }
}

t.test('the token on the API, on userinfo, then revoked by the app', async (t) => {
  const { access_token } = await runFlow(t, {
    pkce: true,
    auth: 'client_secret_post',
    scope: 'read listings:write',
  });

  const info = await bearerCall(access_token, 'GET', '/oauth/userinfo');
  t.equal(info.status, 200, 'userinfo: 200');
  const profile = await info.json();
  t.equal(profile.data.id, user.id);
  t.equal(profile.data.email, user.email, 'userinfo carries the email');
  t.equal(profile.meta.environment, 'live');

  const created = await bearerCall(access_token, 'POST', '/api/v1/listings', {
    title: 'Written through OAuth',
    price_cents: 4200,
  });
  t.equal(created.status, 201, 'POST /api/v1/listings with the token');
  const listing = (await created.json()) as {
    data: { id: string; seller: { id: string; username: string } };
    meta: { environment: string };
  };
  t.equal(listing.data.seller.id, user.id, 'the seller is the authorizing user');
  t.equal(listing.meta.environment, 'live', 'tokens act in live');
  const [row] = await app.db
    .select({ appId: listings.appId, environment: listings.environment })
    .from(listings)
    .where(eq(listings.id, listing.data.id));
  t.equal(row?.appId, client.clientId, 'the listing records the app');
  t.equal(row?.environment, 'live');

  const revoked = await oauth.revocationRequest(
    as,
    clientMeta,
    oauth.ClientSecretBasic(client.clientSecret),
    access_token,
    insecure,
  );
  t.equal(revoked.status, 200, 'revocation: 200');
  t.equal(revoked.headers.get('cache-control'), 'no-store');
  await oauth.processRevocationResponse(revoked);

  const after = await rawCall(access_token, 'GET', '/api/v1/me');
  t.equal(after.status, 401, 'a revoked token is 401');
  t.match(after.headers.get('www-authenticate'), /^Bearer/);
  t.equal((await rawCall(access_token, 'GET', '/oauth/userinfo')).status, 401, 'userinfo too');
});

t.test('a token granted only read cannot write listings', async (t) => {
  const { access_token } = await runFlow(t, {
    pkce: false,
    auth: 'client_secret_basic',
    scope: 'read',
  });
  const res = await rawCall(access_token, 'POST', '/api/v1/listings', {
    title: 'Not allowed',
    price_cents: 100,
  });
  t.equal(res.status, 403, 'no listings:write: 403');
  t.equal((await res.json()).error.code, 'forbidden');
  t.match(res.headers.get('www-authenticate'), /insufficient_scope/);
  t.equal((await bearerCall(access_token, 'GET', '/api/v1/me')).status, 200, 'read still works');
});

/** A refresh as oauth4webapi makes it (RFC 6749 §6), with the client's secret. */
async function refreshWith(
  refreshToken: string,
  auth: 'client_secret_basic' | 'client_secret_post' = 'client_secret_basic',
) {
  const clientAuth =
    auth === 'client_secret_basic'
      ? oauth.ClientSecretBasic(client.clientSecret)
      : oauth.ClientSecretPost(client.clientSecret);
  const response = await oauth.refreshTokenGrantRequest(
    as,
    clientMeta,
    clientAuth,
    refreshToken,
    insecure,
  );
  return oauth.processRefreshTokenResponse(as, clientMeta, response);
}

t.test(
  'refresh: code -> token -> refresh -> refresh, then a reused refresh token revokes the grant',
  async (t) => {
    const first = await runFlow(t, {
      pkce: true,
      auth: 'client_secret_post',
      scope: 'read listings:write',
    });
    const second = await refreshWith(first.refresh_token!);
    t.match(
      second,
      { token_type: 'bearer', expires_in: 2_592_000, scope: 'read listings:write' },
      'a new access token, 30 days, same scopes',
    );
    t.match(second.refresh_token, /^svc_rt_/, 'and a new refresh token');
    t.not(second.refresh_token, first.refresh_token, 'rotated');
    const third = await refreshWith(second.refresh_token!, 'client_secret_post');
    t.not(third.access_token, second.access_token);
    for (const token of [first.access_token, second.access_token, third.access_token]) {
      t.equal(
        (await bearerCall(token, 'GET', '/api/v1/me')).status,
        200,
        'every access token of the chain works until it expires',
      );
    }

    // The first refresh token was rotated: presenting it again is reuse (RFC 9700 §4.14.2).
    const reuse = await oauth.refreshTokenGrantRequest(
      as,
      clientMeta,
      oauth.ClientSecretBasic(client.clientSecret),
      first.refresh_token!,
      insecure,
    );
    t.equal(
      await oauthErrorOf(oauth.processRefreshTokenResponse(as, clientMeta, reuse)),
      'invalid_grant',
      'reuse: invalid_grant',
    );
    for (const token of [first.access_token, second.access_token, third.access_token]) {
      t.equal(
        (await rawCall(token, 'GET', '/api/v1/me')).status,
        401,
        'and every access token of the grant answers 401',
      );
    }
    t.equal(
      await oauthErrorOf(refreshWith(third.refresh_token!)),
      'invalid_grant',
      'so does the newest refresh token',
    );
  },
);

t.test('revoking a refresh token (RFC 7009) revokes the whole authorization', async (t) => {
  const tokens = await runFlow(t, { pkce: true, auth: 'client_secret_basic', scope: 'read' });
  const revoked = await oauth.revocationRequest(
    as,
    clientMeta,
    oauth.ClientSecretBasic(client.clientSecret),
    tokens.refresh_token!,
    {
      ...insecure,
      additionalParameters: { token_type_hint: 'refresh_token' },
    },
  );
  await oauth.processRevocationResponse(revoked);
  t.equal(
    (await rawCall(tokens.access_token, 'GET', '/api/v1/me')).status,
    401,
    'the access token of the authorization is revoked too',
  );
  t.equal(
    await oauthErrorOf(refreshWith(tokens.refresh_token!)),
    'invalid_grant',
    'and the refresh token no longer refreshes',
  );
});
