// /oauth/authorize and the sign-in pages: the client and redirect URI are checked before
// anything else (an HTML page, never a redirect), other problems redirect with error and
// state, sign-in and consent with CSRF tokens, and sign-in failures that reveal nothing and
// are limited.
import t, { type Test } from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser, csrfOf, formActionOf } from '../helpers/browser.ts';
import { authorizePath, createClient, createEndUser } from './support.ts';

const app = await buildTestApp(t);
const client = await createClient(app);
const user = await createEndUser(app);

const baseParams = {
  response_type: 'code',
  client_id: client.clientId,
  redirect_uri: client.redirectUri,
  state: 'st-123',
};
const valid = (extra: Record<string, string | undefined> = {}) =>
  authorizePath({ ...baseParams, ...extra });

function assertPageHeaders(t: Test, res: { headers: Record<string, unknown> }, label: string) {
  t.match(res.headers['content-type'], /^text\/html; charset=utf-8/, `${label}: HTML`);
  t.match(
    res.headers['content-security-policy'],
    /frame-ancestors 'none'/,
    `${label}: CSP frame-ancestors 'none'`,
  );
  t.equal(res.headers['x-frame-options'], 'DENY', `${label}: X-Frame-Options DENY`);
  t.equal(res.headers['cache-control'], 'no-store', `${label}: not cached`);
}

t.test(
  'client_id and redirect_uri are checked first: an HTML 400 page, never a redirect',
  async (t) => {
    await app.services.apps.addRedirectUri(client.clientId, 'https://client.example.com/other');
    const cases: [string, string][] = [
      ['unknown client_id', valid({ client_id: '00000000-0000-4000-8000-000000000000' })],
      ['client_id that is not a UUID', valid({ client_id: 'not-an-app' })],
      ['missing client_id', valid({ client_id: undefined })],
      ['repeated client_id', `${valid()}&client_id=${client.clientId}`],
      ['missing redirect_uri', valid({ redirect_uri: undefined })],
      ['unregistered redirect_uri', valid({ redirect_uri: 'https://evil.example.net/callback' })],
      ['redirect_uri with an extra slash', valid({ redirect_uri: `${client.redirectUri}/` })],
      ['redirect_uri with an added query', valid({ redirect_uri: `${client.redirectUri}?x=1` })],
      [
        'registered for another app',
        valid({ client_id: (await createClient(app, 'https://b.example.com/cb')).clientId }),
      ],
      // Even with every other parameter wrong, the client check comes first.
      [
        'unregistered redirect_uri and bad response_type',
        valid({ redirect_uri: 'https://evil.example.net/cb', response_type: 'token' }),
      ],
    ];
    for (const [label, url] of cases) {
      const res = await app.inject({ method: 'GET', url });
      t.equal(res.statusCode, 400, `${label}: 400`);
      t.notOk(res.headers.location, `${label}: no redirect`);
      t.match(res.body, /This link is not valid/, `${label}: the error page`);
      assertPageHeaders(t, res, label);
    }
  },
);

t.test(
  'other request errors redirect to the client with error, error_description and state',
  async (t) => {
    const cases: [string, Record<string, string | undefined>, string][] = [
      ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
      ['missing response_type', { response_type: undefined }, 'invalid_request'],
      ['unknown scope', { scope: 'read admin' }, 'invalid_scope'],
      // webhooks:write is an API key's scope only (OpenAPI "Webhook endpoints").
      ['the key-only scope webhooks:write', { scope: 'read webhooks:write' }, 'invalid_scope'],
      // So is audit:read (OpenAPI "Audit log").
      ['the key-only scope audit:read', { scope: 'read audit:read' }, 'invalid_scope'],
      [
        'code_challenge_method=plain',
        { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' },
        'invalid_request',
      ],
      ['code_challenge without a method', { code_challenge: 'a'.repeat(43) }, 'invalid_request'],
      [
        'code_challenge_method without a challenge',
        { code_challenge_method: 'S256' },
        'invalid_request',
      ],
      [
        'malformed code_challenge',
        { code_challenge: 'short', code_challenge_method: 'S256' },
        'invalid_request',
      ],
    ];
    for (const [label, extra, error] of cases) {
      const res = await app.inject({ method: 'GET', url: valid(extra) });
      t.equal(res.statusCode, 302, `${label}: 302`);
      const location = new URL(String(res.headers.location));
      t.equal(
        `${location.origin}${location.pathname}`,
        client.redirectUri,
        `${label}: to the registered redirect_uri`,
      );
      t.equal(location.searchParams.get('error'), error, `${label}: error=${error}`);
      t.ok(location.searchParams.get('error_description'), `${label}: error_description`);
      t.equal(location.searchParams.get('state'), 'st-123', `${label}: state echoed`);
      t.notOk(location.searchParams.get('code'), `${label}: no code`);
    }
    const noState = await app.inject({
      method: 'GET',
      url: valid({ state: undefined, response_type: 'token' }),
    });
    t.notOk(
      new URL(String(noState.headers.location)).searchParams.has('state'),
      'no state sent, none echoed',
    );
  },
);

t.test(
  'sign-in page, then the consent page naming the app, its owner and each scope',
  async (t) => {
    const browser = new Browser(app);
    const url = valid({ scope: 'read listings:write' });
    const login = await browser.get(url);
    t.equal(login.statusCode, 200);
    assertPageHeaders(t, login, 'sign-in page');
    t.match(login.body, /<label for="username">Username<\/label>/, 'labelled username field');
    t.match(login.body, /<label for="password">Password<\/label>/, 'labelled password field');
    t.match(login.body, /name="username"/);
    t.match(login.body, /type="password" id="password" name="password"/);
    t.ok(csrfOf(login.body), 'a CSRF token in a hidden input');
    t.equal(
      formActionOf(login.body),
      url,
      'the form posts to /oauth/authorize with the same query',
    );
    t.match(login.body, /<link rel="stylesheet" href="\/assets\/web.css">/, 'the local stylesheet');
    t.notMatch(login.body, /<script/, 'no script');

    const css = await app.inject({ method: 'GET', url: '/assets/web.css' });
    t.equal(css.statusCode, 200, 'the stylesheet is served');
    t.match(css.headers['content-type'], /^text\/css/);

    const signedIn = await browser.submit({ username: user.username, password: user.password });
    t.equal(signedIn.statusCode, 303, 'signed in: 303');
    t.equal(signedIn.headers.location, url, 'back to the authorization request');
    const cookie = String(
      ([] as string[])
        .concat(signedIn.headers['set-cookie'] as string[])
        .find((c) => c.startsWith('svc_session=')),
    );
    t.match(cookie, /HttpOnly/, 'session cookie HttpOnly');
    t.match(cookie, /SameSite=Lax/, 'session cookie SameSite=Lax');
    t.notMatch(cookie, /Secure/, 'not Secure under an http BASE_URL');

    const consent = await browser.get(url);
    t.equal(consent.statusCode, 200);
    assertPageHeaders(t, consent, 'consent page');
    t.match(consent.body, client.name, 'names the app');
    t.match(consent.body, `@${client.ownerUsername}`, 'names its owner');
    t.match(consent.body, /See your profile/, 'the read scope in plain words');
    t.notMatch(consent.body, /webhook/i, 'never the key-only scope webhooks:write');
    t.notMatch(consent.body, /audit/i, 'nor audit:read');
    t.match(
      consent.body,
      /Create, edit and archive listings/,
      'the listings:write scope in plain words',
    );
    t.match(consent.body, /<button type="submit" name="decision" value="allow"/, 'an Allow button');
    t.match(consent.body, /<button type="submit" name="decision" value="deny"/, 'a Deny button');
    t.match(
      consent.headers['content-security-policy'],
      /form-action 'self' https:\/\/client\.example\.com/,
      'the form may lead back to the client',
    );

    const readOnly = await browser.get(valid());
    t.match(readOnly.body, /See your profile/, 'default scope: read');
    t.notMatch(
      readOnly.body,
      /Create, edit and archive listings/,
      'listings:write only when asked',
    );
  },
);

t.test('deny redirects with access_denied and state; allow with code and state', async (t) => {
  const browser = new Browser(app);
  const denied = await browser.authorize(valid(), user, 'deny');
  t.equal(`${denied.origin}${denied.pathname}`, client.redirectUri);
  t.equal(denied.searchParams.get('error'), 'access_denied');
  t.ok(denied.searchParams.get('error_description'));
  t.equal(denied.searchParams.get('state'), 'st-123');
  t.notOk(denied.searchParams.get('code'));

  const allowed = await browser.authorize(valid(), user, 'allow');
  t.match(allowed.searchParams.get('code'), /^svc_ac_/);
  t.equal(allowed.searchParams.get('state'), 'st-123');

  const withQuery = 'https://client.example.com/callback?tenant=7';
  await app.services.apps.addRedirectUri(client.clientId, withQuery);
  const kept = await browser.authorize(valid({ redirect_uri: withQuery }), user);
  t.equal(kept.searchParams.get('tenant'), '7', "the redirect URI's own query is kept");
  t.match(kept.searchParams.get('code'), /^svc_ac_/);

  await browser.get(valid());
  const odd = await browser.submit({ decision: 'maybe' });
  t.equal(odd.statusCode, 400, 'an unknown decision: the consent page again');
  t.notOk(odd.headers.location);
});

t.test('CSRF: sign-in and consent posts without the right token are refused', async (t) => {
  const browser = new Browser(app);
  await browser.get(valid());
  const noToken = await browser.post(valid(), { username: user.username, password: user.password });
  t.equal(noToken.statusCode, 403, 'sign-in without a token: 403');
  t.notOk(browser.cookies.has('svc_session'), 'no session');
  const forged = await browser.post(valid(), {
    username: user.username,
    password: user.password,
    csrf_token: 'x'.repeat(43),
  });
  t.equal(forged.statusCode, 403, 'sign-in with a forged token: 403');

  // A token of another browser does not work in this one.
  const other = new Browser(app);
  await other.get(valid());
  const foreign = await browser.post(valid(), {
    username: user.username,
    password: user.password,
    csrf_token: csrfOf(other.page),
  });
  t.equal(foreign.statusCode, 403, "another browser's token: 403");

  await browser.signIn(valid(), user);
  const consentNoToken = await browser.post(valid(), { decision: 'allow' });
  t.equal(consentNoToken.statusCode, 403, 'consent without a token: 403');
  t.notOk(consentNoToken.headers.location, 'no redirect, no code');
  const staleToken = await browser.post(valid(), {
    decision: 'allow',
    csrf_token: csrfOf(other.page),
  });
  t.equal(
    staleToken.statusCode,
    403,
    'consent with a token from before sign-in / another browser: 403',
  );
  t.match(staleToken.body, /expired/, 'the page says why and offers the form again');
  t.ok(csrfOf(staleToken.body), 'with a fresh token');

  const consentFromNowhere = await new Browser(app).post(valid(), {
    decision: 'allow',
    csrf_token: 'x',
  });
  t.equal(consentFromNowhere.statusCode, 401, 'consent without a session: the sign-in page');
  t.notOk(consentFromNowhere.headers.location);
});

t.test('sign-in failures: one message for an unknown user and a wrong password', async (t) => {
  const browser = new Browser(app);
  await browser.get(valid());
  const unknown = await browser.submit({ username: 'nobody_here', password: 'whatever password' });
  const wrong = await browser.submit({ username: user.username, password: 'not the password' });
  const alert = (html: string) => /<p class="alert" role="alert">([^<]*)<\/p>/.exec(html)?.[1];
  t.equal(unknown.statusCode, 401);
  t.equal(wrong.statusCode, 401);
  t.equal(alert(unknown.body), 'Incorrect username or password.');
  t.equal(alert(wrong.body), alert(unknown.body), 'the same message either way');
  t.notOk(browser.cookies.has('svc_session'), 'no session');
});

t.test('repeated sign-in failures are limited, per IP and username, and per IP', async (t) => {
  const victim = await createEndUser(app);
  // Five failures from one browser (one IP), then even the right password waits there.
  const guesser = new Browser(app);
  await guesser.get(valid());
  for (let i = 0; i < 5; i += 1) {
    t.equal(
      (await guesser.submit({ username: victim.username, password: `guess ${i} wrong` }))
        .statusCode,
      401,
      `failure ${i + 1}`,
    );
  }
  const locked = await guesser.submit({ username: victim.username, password: victim.password });
  t.equal(locked.statusCode, 429, 'the sixth attempt from that IP: 429');
  t.ok(Number(locked.headers['retry-after']) > 0, 'with Retry-After');
  t.match(locked.body, /Too many sign-in attempts/);
  t.notOk(guesser.cookies.has('svc_session'), 'not signed in');
  const owner = new Browser(app);
  await owner.get(valid());
  t.equal(
    (await owner.submit({ username: victim.username, password: victim.password })).statusCode,
    303,
    'the owner, from another IP, signs in',
  );
  // Same for a username that does not exist: the limit tells nothing about existence.
  const ghost = new Browser(app);
  await ghost.get(valid());
  for (let i = 0; i < 5; i += 1)
    await ghost.submit({ username: 'ghost_user', password: `guess ${i}` });
  t.equal(
    (await ghost.submit({ username: 'ghost_user', password: 'again' })).statusCode,
    429,
    'unknown username: also 429',
  );

  // One IP: 10 attempts a minute, whatever the usernames.
  const flood = new Browser(app);
  await flood.get(valid());
  const statuses: number[] = [];
  for (let i = 0; i < 11; i += 1)
    statuses.push(
      (await flood.submit({ username: `name_${i}`, password: 'nope nope' })).statusCode,
    );
  t.strictSame(statuses.slice(0, 10), Array(10).fill(401), 'ten attempts are answered');
  t.equal(statuses[10], 429, 'the eleventh from that IP: 429');
});

t.test('sign-out ends the session', async (t) => {
  const browser = new Browser(app);
  const consent = await browser.signIn(valid(), user);
  t.match(consent.body, /Sign out/, 'the consent page offers sign-out');
  const refused = await browser.post('/logout', { return_to: '/login' });
  t.equal(refused.statusCode, 403, 'sign-out without a CSRF token: 403');
  const out = await browser.post('/logout', {
    csrf_token: csrfOf(/<form class="inline"[\s\S]*$/.exec(consent.body)![0]),
    return_to: valid(),
  });
  t.equal(out.statusCode, 303);
  t.equal(out.headers.location, valid(), 'back to where the user was');
  t.notOk(browser.cookies.has('svc_session'), 'the cookie is cleared');
  const again = await browser.get(valid());
  t.match(again.body, /<h1>Sign in<\/h1>/, 'signed out: the sign-in page again');
});

t.test('/login on its own, and no open redirect', async (t) => {
  const browser = new Browser(app);
  const page = await browser.get('/login?return_to=/account/apps');
  t.equal(page.statusCode, 200);
  assertPageHeaders(t, page, '/login');
  const ok = await browser.submit({ username: user.username, password: user.password });
  t.equal(ok.statusCode, 303);
  t.equal(ok.headers.location, '/account/apps');
  t.equal((await browser.get('/login')).statusCode, 303, 'already signed in: on to the next page');

  const other = new Browser(app);
  await other.get('/login?return_to=//evil.example.net/x');
  const res = await other.submit({
    username: user.username,
    password: user.password,
    return_to: '//evil.example.net/x',
  });
  t.equal(res.headers.location, '/account/apps', 'a foreign return_to is ignored');
});

t.test('form bodies are accepted only where declared: the API stays JSON only', async (t) => {
  const key = await createKey(app, await createDeveloper(app), 'sandbox');
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...bearer(key) },
    payload: 'title=Form+listing&price_cents=100',
  });
  t.equal(res.statusCode, 415, 'a form body on a JSON operation: 415');
  t.equal(res.json().error.code, 'unsupported_media_type');
});
