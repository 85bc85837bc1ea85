/**
 * Contract tests of the OAuth operations (RFC 6749 authorization code grant with PKCE,
 * refresh, userinfo, RFC 7009 revocation, RFC 8414 metadata): their documented examples
 * replayed with real credentials, then a scenario for every documented status that can be
 * produced for real; and the oauth2 security alternative of the API's operations.
 */
import { eq } from 'drizzle-orm';
import t from 'tap';
import { oauthCodes } from '../../src/db/schema.ts';
import { basicAuth, createClient, s256 } from '../oauth/support.ts';
import { responseFor } from './document.ts';
import { basicHeader, form, nextAddress, postAuth } from './oauth-fixtures.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { header, type Asserter, type ContractResponse } from './recorder.ts';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite, listingBody, past, UNKNOWN_ID, unknownToken } from './support.ts';

const suite = await contractSuite(t);
const { app, doc, fixtures, keys, oauth, send, tokens, unauthorized } = suite;
const replay = replayExamples(t, suite, 'OAuth', {
  // "The sign-in form (fields username, password) when there is no session, then the consent
  // form (name="decision" value="allow" and value="deny")", posting to itself with the query
  // string and a CSRF token; framing forbidden.
  authorize: (t, res, caller, sent) => {
    const signedIn = caller.headers?.cookie !== undefined;
    if (signedIn) {
      t.match(
        res.text,
        /<button[^>]*name="decision" value="allow"/,
        `${caller.name}: the consent page, with Allow`,
      );
      t.match(
        res.text,
        /<button[^>]*name="decision" value="deny"/,
        `${caller.name}: the consent page, with Deny`,
      );
    } else {
      t.match(
        res.text,
        /<input[^>]*name="username"/,
        `${caller.name}: the sign-in page, with username`,
      );
      t.match(
        res.text,
        /<input[^>]*type="password"[^>]*name="password"|<input[^>]*name="password"[^>]*type="password"/,
        'and password',
      );
      t.notMatch(res.text, /name="decision"/, 'no consent form before sign-in');
    }
    t.match(
      res.text,
      /<input type="hidden" name="csrf_token" value="[^"]+">/,
      'a CSRF token in a hidden input',
    );
    const action = /<form method="post" action="([^"]+)"/
      .exec(res.text)?.[1]
      ?.replaceAll('&amp;', '&');
    t.strictSame(
      action === undefined ? null : Object.fromEntries(new URL(action, 'http://x').searchParams),
      sent.query,
      'the form posts to /oauth/authorize with the original query',
    );
    t.equal(header(res.headers, 'x-frame-options'), 'DENY', 'X-Frame-Options: DENY');
    t.match(
      header(res.headers, 'content-security-policy'),
      /frame-ancestors 'none'/,
      "CSP frame-ancestors 'none'",
    );
  },
  oauthUserinfo: (t, res) => {
    t.match(
      res.json?.data,
      { username: oauth.user.username, email: oauth.user.email },
      'the profile of the user who authorized the token, with email',
    );
    t.equal(res.json?.sub, res.json?.data?.id, 'sub is the user id');
  },
});

// OAuth. Errors of /oauth/token and /oauth/revoke are validated against OAuthError by the
// recorder (never the envelope, Cache-Control: no-store, Basic challenge after Basic); here
// each scenario also names the RFC 6749 error code it must get.

function oauthError(t: Asserter, res: ContractResponse, error: string) {
  t.equal(res.json?.error, error, `error=${error}`, { body: res.text.slice(0, 300) });
}

t.test('getAuthorizationServerMetadata', async (t) => {
  const op = doc.operation('getAuthorizationServerMetadata');
  const res = await send(t, { op: op.operationId, label: 'anonymous', expect: 200 });
  // The example is written for the default BASE_URL; every URL is built from BASE_URL.
  const example = JSON.stringify(
    responseFor(op, 200)?.content.get('application/json')?.examples[0]?.value,
  );
  t.strictSame(
    res.json,
    JSON.parse(example.replaceAll('http://127.0.0.1:3000', app.config.baseUrl)),
    'the documented metadata, for this BASE_URL',
  );
  t.equal(res.json?.issuer, app.config.baseUrl, 'issuer is BASE_URL');
  t.equal(header(res.headers, 'cache-control'), 'public, max-age=3600', 'cacheable for an hour');
  await send(t, {
    op: op.operationId,
    label: 'with an API key (no credential is needed or checked)',
    credential: keys.live,
    expect: 200,
  });
});

const CHALLENGE = s256('contract-verifier-0123456789-0123456789-0123456789');
type QueryValue = string | readonly string[] | undefined;
/** An authorization request of the registered app; undefined leaves a parameter out. */
function authorizeQuery(
  extra: Record<string, QueryValue> = {},
  client = oauth.client,
): Record<string, string | readonly string[]> {
  const all: Record<string, QueryValue> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    state: 'contract-state',
    ...extra,
  };
  return Object.fromEntries(
    Object.entries(all).filter(
      (e): e is [string, string | readonly string[]] => e[1] !== undefined,
    ),
  );
}

/** RFC 6749 §4.1.2.1: back at the registered URI (its own query kept) with the result appended. */
function redirectedTo(
  t: Asserter,
  res: ContractResponse,
  redirectUri: string,
  expected: Record<string, string | null>,
) {
  const location = header(res.headers, 'location') ?? '';
  t.ok(
    location.startsWith(`${redirectUri}${redirectUri.includes('?') ? '&' : '?'}`),
    `Location starts with the registered redirect_uri (${location})`,
  );
  const params = new URL(location, 'http://invalid').searchParams;
  for (const [name, value] of Object.entries(expected))
    t.equal(params.get(name), value, `Location ${name}=${value}`);
}

t.test('authorize', async (t) => {
  const op = 'authorize';
  const session = { cookie: oauth.sessionCookie() };

  const login = await send(t, {
    op,
    label: 'no session: the sign-in page',
    query: authorizeQuery({ scope: 'read listings:write' }),
    expect: 200,
  });
  t.match(login.text, /name="password"/, 'the sign-in page');
  const consent = await send(t, {
    op,
    label: 'signed in: the consent page',
    headers: session,
    query: authorizeQuery({ scope: 'listings:write' }),
    expect: 200,
  });
  t.match(consent.text, /name="decision" value="allow"/, 'the consent page');
  await send(t, {
    op,
    label: 'signed in, with PKCE S256 and no state',
    headers: session,
    query: authorizeQuery({
      state: undefined,
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
    }),
    expect: 200,
  });
  await send(t, {
    op,
    label: 'unknown parameters are ignored',
    headers: session,
    query: authorizeQuery({ prompt: 'consent', nonce: 'n' }),
    expect: 200,
  });

  // Step 2: once the client and redirect URI are trusted, problems go back to the client (302).
  const redirects: [string, Record<string, QueryValue>, string][] = [
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['response_type repeated', { response_type: ['code', 'code'] }, 'invalid_request'],
    ['an unknown scope', { scope: 'read admin' }, 'invalid_scope'],
    [
      'code_challenge_method=plain',
      { code_challenge: CHALLENGE, code_challenge_method: 'plain' },
      'invalid_request',
    ],
    [
      'a code_challenge without code_challenge_method',
      { code_challenge: CHALLENGE },
      'invalid_request',
    ],
    [
      'code_challenge_method without a code_challenge',
      { code_challenge_method: 'S256' },
      'invalid_request',
    ],
    [
      'a code_challenge that is not an S256 value',
      { code_challenge: 'too-short', code_challenge_method: 'S256' },
      'invalid_request',
    ],
  ];
  for (const [label, extra, error] of redirects) {
    const res = await send(t, { op, label, query: authorizeQuery(extra), expect: 302 });
    redirectedTo(t, res, oauth.client.redirectUri, { error, state: 'contract-state' });
    t.type(
      new URL(header(res.headers, 'location') ?? '', 'http://invalid').searchParams.get(
        'error_description',
      ),
      'string',
      'with error_description',
    );
  }
  const signedIn = await send(t, {
    op,
    label: 'an unknown scope, signed in',
    headers: session,
    query: authorizeQuery({ scope: 'admin' }),
    expect: 302,
  });
  redirectedTo(t, signedIn, oauth.client.redirectUri, {
    error: 'invalid_scope',
    state: 'contract-state',
  });
  const stateless = await send(t, {
    op,
    label: 'response_type=token without state',
    query: authorizeQuery({ response_type: 'token', state: undefined }),
    expect: 302,
  });
  redirectedTo(t, stateless, oauth.client.redirectUri, {
    error: 'unsupported_response_type',
    state: null,
  });
  const withQuery = await send(t, {
    op,
    label: 'a redirect_uri with a query of its own',
    query: authorizeQuery({ response_type: 'token' }, oauth.queryClient),
    expect: 302,
  });
  redirectedTo(t, withQuery, oauth.queryClient.redirectUri, {
    tenant: '7',
    error: 'unsupported_response_type',
    state: 'contract-state',
  });

  // Step 1: an unknown client or an unregistered redirect URI is an HTML page, never a redirect.
  const { redirectUri } = oauth.client;
  const pages: [string, Record<string, QueryValue>][] = [
    ['an unknown client_id', { client_id: UNKNOWN_ID }],
    ['a client_id that is not a UUID', { client_id: 'not-a-client' }],
    ['no client_id', { client_id: undefined }],
    [
      'a redirect_uri that is not registered',
      { redirect_uri: 'https://attacker.example.net/callback' },
    ],
    ["another app's redirect_uri", { redirect_uri: oauth.otherClient.redirectUri }],
    ['the registered redirect_uri with a trailing slash', { redirect_uri: `${redirectUri}/` }],
    [
      'the registered redirect_uri with its host in upper case',
      { redirect_uri: redirectUri.replace('client.example.com', 'CLIENT.example.com') },
    ],
    ['the registered redirect_uri with an extra query', { redirect_uri: `${redirectUri}?x=1` }],
    ['no redirect_uri', { redirect_uri: undefined }],
    ['redirect_uri repeated', { redirect_uri: [redirectUri, redirectUri] }],
    [
      'an unregistered redirect_uri and response_type=token',
      { redirect_uri: 'https://attacker.example.net/callback', response_type: 'token' },
    ],
    ['an unknown client_id and an unknown scope', { client_id: UNKNOWN_ID, scope: 'admin' }],
  ];
  for (const [label, extra] of pages) {
    for (const [who, headers] of [
      ['', {}],
      [', signed in', session],
    ] as const) {
      const res = await send(t, {
        op,
        label: `${label}${who}`,
        headers,
        query: authorizeQuery(extra),
        expect: 400,
      });
      t.equal(header(res.headers, 'location'), undefined, `${label}${who}: no redirect`);
    }
  }
});

t.test('oauthToken', async (t) => {
  const op = 'oauthToken';
  const { client, otherClient } = oauth;
  const grant = (
    code: string | readonly string[],
    extra: Record<string, string | readonly string[] | undefined> = {},
  ) => ({
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    ...extra,
  });
  const token = (
    label: string,
    fields: Record<string, string | readonly string[] | undefined>,
    expect: number,
    headers: Record<string, string> = {},
  ) => send(t, { op, label, ...form(fields), headers, remoteAddress: nextAddress(), expect });

  // 200
  const basic = await token(
    'client_secret_basic, with the same client_id in the body',
    grant(await oauth.code(), { client_id: client.clientId }),
    200,
    basicHeader(client),
  );
  t.equal(basic.json?.scope, 'read', 'no scope requested: read');
  t.equal(basic.json?.expires_in, 2592000, '30 days');
  const pkce = await oauth.pkceCode({ scope: 'read listings:write' });
  const withPkce = await token(
    'client_secret_post, PKCE',
    grant(pkce.code, { code_verifier: pkce.verifier, ...postAuth(client) }),
    200,
  );
  t.equal(withPkce.json?.scope, 'read listings:write', 'the granted scope');
  await token(
    'unknown parameters are ignored',
    grant(await oauth.code(), { ...postAuth(client), resource: 'https://api.example.com' }),
    200,
  );

  // 400 invalid_grant: the code is one use, bound to its client, redirect URI and PKCE challenge.
  const used = await oauth.code();
  const first = await token('a code, first use', grant(used, postAuth(client)), 200);
  oauthError(
    t,
    await token('the same code again', grant(used, postAuth(client)), 400),
    'invalid_grant',
  );
  if (typeof first.json?.access_token === 'string') {
    await send(t, {
      op: 'oauthUserinfo',
      label: 'the token issued from a replayed code is revoked',
      credential: first.json.access_token,
      expect: 401,
    });
  }
  oauthError(
    t,
    await token(
      "another app's code",
      grant(await oauth.code({ client: otherClient }), postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'another redirect_uri than the authorization request',
      grant(await oauth.code(), {
        ...postAuth(client),
        redirect_uri: 'https://client.example.com/other',
      }),
      400,
    ),
    'invalid_grant',
  );
  const wrong = await oauth.pkceCode();
  oauthError(
    t,
    await token(
      'PKCE: a code_verifier of another challenge',
      grant(wrong.code, { ...postAuth(client), code_verifier: 'a'.repeat(43) }),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'PKCE: no code_verifier for a code with a challenge',
      grant((await oauth.pkceCode()).code, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'PKCE: a code_verifier for a code without a challenge',
      grant(await oauth.code(), { ...postAuth(client), code_verifier: 'b'.repeat(43) }),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'a code that was never issued',
      grant(`svc_ac_${'Q'.repeat(43)}`, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token('a code of no known kind', grant('not-a-code', postAuth(client)), 400),
    'invalid_grant',
  );
  const expiring = await oauth.code();
  await app.db
    .update(oauthCodes)
    .set({ expiresAt: past() })
    .where(eq(oauthCodes.codeHash, hashSecret(expiring)));
  oauthError(
    t,
    await token(
      'an expired code (its expiry moved into the past)',
      grant(expiring, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );

  // 400 unsupported_grant_type (after client authentication).
  for (const grantType of [
    'client_credentials',
    'password',
    'urn:ietf:params:oauth:grant-type:device_code',
  ]) {
    oauthError(
      t,
      await token(
        `grant_type=${grantType}`,
        {
          grant_type: grantType,
          refresh_token: 'x',
          username: 'u',
          password: 'p',
          ...postAuth(client),
        },
        400,
      ),
      'unsupported_grant_type',
    );
  }

  // Refresh tokens: rotation, reuse detection, scope narrowing only, bound to their client.
  const minted = await oauth.tokens(t, 'for the refresh scenarios', {
    scope: 'read listings:write',
  });
  const refresh = (
    label: string,
    refreshToken: string,
    extra: Record<string, string> = {},
    expect = 200,
    who = client,
  ) =>
    token(
      label,
      { grant_type: 'refresh_token', refresh_token: refreshToken, ...postAuth(who), ...extra },
      expect,
    );
  oauthError(
    t,
    await refresh(
      'a refresh asking for a scope the authorization lacks',
      minted.refresh,
      { scope: 'read admin' },
      400,
    ),
    'invalid_scope',
  );
  oauthError(
    t,
    await refresh("another client's refresh token", minted.refresh, {}, 400, otherClient),
    'invalid_grant',
  );
  const narrowed = await refresh('a refresh narrowing the scope to read', minted.refresh, {
    scope: 'read',
  });
  t.equal(narrowed.json?.scope, 'read', 'the new access token has the narrower scope');
  t.match(narrowed.json, { token_type: 'Bearer', expires_in: 2592000, refresh_token: /^svc_rt_/ });
  const again = await refresh(
    'the rotated refresh token keeps the full scope',
    narrowed.json?.refresh_token,
  );
  t.equal(
    again.json?.scope,
    'read listings:write',
    "the refresh token kept the authorization's scopes",
  );
  oauthError(
    t,
    await refresh('a refresh token used a second time (reuse)', minted.refresh, {}, 400),
    'invalid_grant',
  );
  for (const revoked of [minted.access, narrowed.json?.access_token, again.json?.access_token]) {
    await send(t, {
      op: 'oauthUserinfo',
      label: 'reuse revoked every token of the authorization',
      credential: revoked,
      expect: 401,
    });
  }
  oauthError(
    t,
    await refresh('the newest refresh token after the reuse', again.json?.refresh_token, {}, 400),
    'invalid_grant',
  );
  oauthError(
    t,
    await refresh('a refresh token that was never issued', `svc_rt_${'Q'.repeat(43)}`, {}, 400),
    'invalid_grant',
  );
  oauthError(
    t,
    await refresh(
      'an access token as the refresh token',
      (await oauth.tokens(t, 'access as refresh')).access,
      {},
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token('refresh_token missing', { grant_type: 'refresh_token', ...postAuth(client) }, 400),
    'invalid_request',
  );

  // 400 invalid_request. None of these consumes the code.
  const kept = await oauth.code();
  const invalid: [
    string,
    Record<string, string | readonly string[] | undefined>,
    Record<string, string>,
  ][] = [
    ['no grant_type', { ...grant(kept), grant_type: undefined, ...postAuth(client) }, {}],
    ['no code', { ...grant(kept), code: undefined, ...postAuth(client) }, {}],
    ['no redirect_uri', { ...grant(kept), redirect_uri: undefined, ...postAuth(client) }, {}],
    ['an empty code', { ...grant(''), ...postAuth(client) }, {}],
    [
      'a code_verifier that is too short',
      grant(kept, { code_verifier: 'short', ...postAuth(client) }),
      {},
    ],
    ['code repeated', grant([kept, kept], postAuth(client)), {}],
    [
      'client_secret_basic and client_secret_post at once',
      grant(kept, postAuth(client)),
      basicHeader(client),
    ],
    [
      'client_secret_basic with another client_id in the body',
      grant(kept, { client_id: otherClient.clientId }),
      basicHeader(client),
    ],
  ];
  for (const [label, fields, headers] of invalid)
    oauthError(t, await token(label, fields, 400, headers), 'invalid_request');
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a JSON body',
      body: grant(kept, postAuth(client)),
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a text/plain body',
      rawBody: form(grant(kept, postAuth(client))).rawBody,
      contentType: 'text/plain',
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );

  // 401 invalid_client (a Basic challenge when Basic was used: checked by the recorder).
  const rotating = await createClient(app, 'https://rotating.example.com/cb');
  const rotated = await app.services.apps.rotateClientSecret(rotating.clientId);
  const unauthenticated: [string, Record<string, string | undefined>, Record<string, string>][] = [
    [
      'a wrong client_secret',
      { client_id: client.clientId, client_secret: `${client.clientSecret}x` },
      {},
    ],
    ['a wrong client_secret (Basic)', {}, basicAuth(client.clientId, 'svc_cs_wrong')],
    ['an unknown client_id', { client_id: UNKNOWN_ID, client_secret: client.clientSecret }, {}],
    ['an unknown client_id (Basic)', {}, basicAuth(UNKNOWN_ID, client.clientSecret)],
    [
      'a client_id that is not a UUID',
      { client_id: 'not-a-client', client_secret: client.clientSecret },
      {},
    ],
    [
      "another app's client_secret",
      { client_id: client.clientId, client_secret: otherClient.clientSecret },
      {},
    ],
    [
      'a client secret replaced by a newer one',
      { client_id: rotating.clientId, client_secret: rotating.clientSecret },
      {},
    ],
    ['client_id without client_secret', { client_id: client.clientId }, {}],
    ['no client authentication', {}, {}],
    ['a malformed Basic header', {}, { authorization: 'Basic !!!' }],
    ['a Bearer Authorization header', {}, { authorization: `Bearer ${tokens.full}` }],
  ];
  for (const [label, auth, headers] of unauthenticated)
    oauthError(t, await token(label, grant(kept, auth), 401, headers), 'invalid_client');
  await token('the code refused above still works', grant(kept, postAuth(client)), 200);
  await token(
    'the newer client secret works',
    {
      ...grant(await oauth.code({ client: rotating }), {
        client_id: rotating.clientId,
        client_secret: rotated.client_secret,
      }),
      redirect_uri: rotating.redirectUri,
    },
    200,
  );

  // "No CORS" on /oauth/*: servers call the token endpoint, never browsers.
  const cors = await send(t, {
    op,
    label: 'from a browser origin',
    headers: { origin: 'https://client.example.com' },
    ...form(grant(await oauth.code(), postAuth(client))),
    remoteAddress: nextAddress(),
    expect: 200,
  });
  t.equal(
    header(cors.headers, 'access-control-allow-origin'),
    undefined,
    'no Access-Control-Allow-Origin',
  );
});

t.test('oauthUserinfo', async (t) => {
  const op = 'oauthUserinfo';
  const me = await send(t, {
    op,
    label: 'token with read listings:write',
    credential: tokens.full,
    expect: 200,
  });
  t.match(me.json?.data, { username: oauth.user.username, email: oauth.user.email });
  t.equal(me.json?.sub, oauth.user.id, 'sub: the user id, beside the envelope');
  await send(t, { op, label: 'token with read only', credential: tokens.readOnly, expect: 200 });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  for (const [name, credential] of [
    ['live API key', keys.live],
    ['sandbox API key', keys.sandbox],
    ['API key with only read', keys.readOnly],
  ] as const) {
    await send(t, { op, label: `an API key is refused: ${name}`, credential, expect: 403 });
  }
  const scope = await send(t, {
    op,
    label: 'token without read',
    credential: tokens.writeOnly,
    expect: 403,
  });
  t.match(
    header(scope.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="read"/,
    'the missing scope is named',
  );
});

t.test('oauthRevoke', async (t) => {
  const op = 'oauthRevoke';
  const { client, otherClient } = oauth;
  const revoke = (
    label: string,
    fields: Record<string, string | undefined>,
    expect: number,
    headers: Record<string, string> = {},
  ) => send(t, { op, label, ...form(fields), headers, remoteAddress: nextAddress(), expect });
  const works = (token: string, label: string, expect: 200 | 401) =>
    send(t, { op: 'oauthUserinfo', label, credential: token, expect });

  // 200, whatever the token: the answer never says whether it was valid.
  const mine = await oauth.token(t, 'a token to revoke with token_type_hint');
  const revoked = await revoke(
    'token_type_hint=refresh_token is ignored',
    { token: mine, token_type_hint: 'refresh_token', ...postAuth(client) },
    200,
  );
  t.strictSame(revoked.json, {}, 'an empty JSON object');
  await works(mine, 'the token revoked above', 401);
  await revoke('the same token again', { token: mine, ...postAuth(client) }, 200);
  await revoke('a token that was never issued', { token: unknownToken, ...postAuth(client) }, 200);
  await revoke('not a token at all', { token: 'not-a-token' }, 200, basicHeader(client));
  const foreign = await oauth.token(t, "another app's token", { client: otherClient });
  await revoke(
    "another app's token (left untouched)",
    { token: foreign, ...postAuth(client) },
    200,
  );
  await works(foreign, "another app's token after the other app tried to revoke it", 200);
  await revoke(
    'an API key (not revocable here)',
    { token: keys.readOnly, ...postAuth(client) },
    200,
  );
  await send(t, {
    op: 'getMe',
    label: 'the API key given to /oauth/revoke still works',
    credential: keys.readOnly,
    expect: 200,
  });

  // 400 invalid_request.
  const target = await oauth.token(t, 'a token the refused revocations leave working');
  oauthError(t, await revoke('no token', postAuth(client), 400), 'invalid_request');
  oauthError(
    t,
    await revoke('an empty token', { token: '', ...postAuth(client) }, 400),
    'invalid_request',
  );
  oauthError(
    t,
    await revoke(
      'client_secret_basic and client_secret_post at once',
      { token: target, ...postAuth(client) },
      400,
      basicHeader(client),
    ),
    'invalid_request',
  );
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a JSON body',
      body: { token: target, ...postAuth(client) },
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );

  // 401 invalid_client.
  const unauthenticated: [string, Record<string, string | undefined>, Record<string, string>][] = [
    [
      'a wrong client_secret',
      { client_id: client.clientId, client_secret: `${client.clientSecret}x` },
      {},
    ],
    ['a wrong client_secret (Basic)', {}, basicAuth(client.clientId, 'svc_cs_wrong')],
    ['an unknown client_id', { client_id: UNKNOWN_ID, client_secret: client.clientSecret }, {}],
    ['no client authentication', {}, {}],
  ];
  for (const [label, auth, headers] of unauthenticated)
    oauthError(t, await revoke(label, { token: target, ...auth }, 401, headers), 'invalid_client');
  await works(target, 'the token survives every refused revocation', 200);
});

t.test(
  'the oauth2 alternative on the API: the token acts in live as the user who authorized it',
  async (t) => {
    const token = tokens.full;
    const me = await send(t, { op: 'getMe', label: 'OAuth token', credential: token, expect: 200 });
    t.equal(
      me.json?.data?.username,
      oauth.user.username,
      'the authorizing user, not the app owner',
    );
    const noRead = await send(t, {
      op: 'getMe',
      label: 'OAuth token without read',
      credential: tokens.writeOnly,
      expect: 403,
    });
    t.match(header(noRead.headers, 'www-authenticate'), /error="insufficient_scope", scope="read"/);
    const noWrite = await send(t, {
      op: 'createListing',
      label: 'OAuth token without listings:write',
      credential: tokens.readOnly,
      body: listingBody('Read-only token write'),
      expect: 403,
    });
    t.match(
      header(noWrite.headers, 'www-authenticate'),
      /error="insufficient_scope", scope="listings:write"/,
    );
    await send(t, {
      op: 'listEvents',
      label: 'OAuth token without read',
      credential: tokens.writeOnly,
      expect: 403,
    });
    await send(t, {
      op: 'batchCreateListings',
      label: 'OAuth token without listings:write',
      credential: tokens.readOnly,
      body: { items: [listingBody('Batch read-only')] },
      expect: 403,
    });

    const draft = await send(t, {
      op: 'createListing',
      label: 'OAuth token: a draft',
      credential: token,
      body: { title: 'Draft through OAuth', price_cents: 1200 },
      expect: 201,
    });
    const id = String(draft.json?.data?.id);
    t.equal(draft.json?.data?.api_environment, 'live', 'created in live');
    const own = await send(t, {
      op: 'getListing',
      label: 'OAuth token: its own live draft',
      credential: token,
      path: { id },
      expect: 200,
    });
    t.ok('external_id' in (own.json?.data ?? {}), 'owner fields for the authorizing user');
    await send(t, {
      op: 'getListing',
      label: "the OAuth user's draft, anonymous",
      path: { id },
      expect: 404,
    });
    await send(t, {
      op: 'getListing',
      label: "the OAuth user's draft, the app owner's live key",
      credential: keys.live,
      path: { id },
      expect: 404,
    });
    await send(t, {
      op: 'getListing',
      label: 'OAuth token: a sandbox listing',
      credential: token,
      path: { id: fixtures.sandboxActive },
      expect: 404,
    });
    await send(t, {
      op: 'updateListing',
      label: 'OAuth token: its own draft',
      credential: token,
      path: { id },
      body: { title: 'Renamed through OAuth' },
      expect: 200,
    });
    await send(t, {
      op: 'updateListing',
      label: "OAuth token: another seller's live active listing",
      credential: token,
      path: { id: fixtures.liveActive },
      body: { title: 'Not mine' },
      expect: 403,
    });
    await send(t, {
      op: 'archiveListing',
      label: "OAuth token: another seller's live active listing",
      credential: token,
      path: { id: fixtures.liveActive },
      expect: 403,
    });
    await send(t, {
      op: 'archiveListing',
      label: 'OAuth token: its own draft',
      credential: token,
      path: { id },
      expect: 200,
    });
    const feed = await send(t, {
      op: 'listListings',
      label: 'OAuth token: the public feed',
      credential: token,
      query: { limit: '100' },
      expect: 200,
    });
    t.notOk(
      (feed.json?.data ?? []).some((l: { id: string }) => l.id === fixtures.sandboxActive),
      'no sandbox listing in the feed',
    );
    const events = await send(t, {
      op: 'listEvents',
      label: "OAuth token: the app's events",
      credential: token,
      query: { limit: '100' },
      expect: 200,
    });
    t.ok(
      (events.json?.data ?? []).some(
        (e: { data?: { listing?: { id?: string } } }) => e.data?.listing?.id === id,
      ),
      "the listing's events belong to the app the token was issued to",
    );
  },
);

checkCoverage(t, suite, replay);
