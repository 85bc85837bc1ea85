/**
 * The portal's pages through app.inject, as a browser without JavaScript uses them: sign-up,
 * the shared sign-in and sign-out, apps, API keys, OAuth settings, the go-live checklist and
 * the production request. Every form is refused without its CSRF token, another user's app is
 * 404 on every page and action, refusals show the services' own words, and secrets are shown
 * once: never again, never in a URL, never in a log line.
 */
import t from 'tap';
import { checkRedirectUri } from '../../src/apps/apps-service.ts';
import { COMMANDS, parseArgs } from '../../src/cli/admin.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { Browser, csrfOf, unescapeHtml } from '../helpers/browser.ts';
import { waitUntil } from '../helpers/wait.ts';
import {
  alertOf,
  appWithLog,
  createApp,
  noticeOf,
  shownSecret,
  signUp,
  type PortalUser,
} from './support.ts';

const { app, log } = await appWithLog(t);

const api = (method: 'GET' | 'POST', url: string, key: string, body?: unknown) =>
  app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });

/** Every secret the pages showed, to look for in URLs and logs at the end. */
const secrets: string[] = [];
const passwords: string[] = [];

function remember(user: PortalUser): PortalUser {
  passwords.push(user.password);
  return user;
}

async function newSandboxKey(
  user: PortalUser,
  appId: string,
  scopes = ['read', 'listings:write'],
): Promise<string> {
  const res = await user.browser.act(`/portal/apps/${appId}/keys`, `/portal/apps/${appId}/keys`, {
    env: 'sandbox',
    scopes,
  });
  const key = shownSecret(res.body, 'new-key');
  if (res.statusCode !== 201 || !key)
    throw new Error(`no key: ${res.statusCode} ${alertOf(res.body)}`);
  secrets.push(key);
  return key;
}

/** Inputs that a person fills in have a label: by `for`, or by wrapping (radios, checkboxes). */
function unlabelledInputs(html: string): string[] {
  const problems: string[] = [];
  for (const match of html.matchAll(/<(input|select|textarea)\b([^>]*)>/g)) {
    const attrs = match[2] ?? '';
    if (/type="hidden"/.test(attrs)) continue;
    const id = /\bid="([^"]+)"/.exec(attrs)?.[1];
    if (id && html.includes(`<label for="${id}"`)) continue;
    if (
      /type="(radio|checkbox)"/.test(attrs) &&
      html
        .slice(Math.max(0, (match.index ?? 0) - 40), match.index)
        .includes('<label class="choice">')
    )
      continue;
    problems.push(match[0]);
  }
  return problems;
}

t.test(
  'a newcomer signs up, lands on their apps, signs out and in again with the shared pages',
  async (t) => {
    const anonymous = new Browser(app);
    const landing = await anonymous.get('/portal');
    t.equal(landing.statusCode, 200);
    t.match(landing.body, /href="\/portal\/signup"/, 'the landing page leads to sign-up');
    t.match(
      landing.body,
      /href="\/login\?return_to=%2Fportal%2Fapps"/,
      'and to the shared sign-in',
    );
    t.equal((await anonymous.get('/login')).statusCode, 200);
    t.match(
      anonymous.page,
      /href="\/portal\/signup\?return_to=/,
      'the sign-in page offers sign-up',
    );

    const protectedPage = await anonymous.get('/portal/apps');
    t.equal(protectedPage.statusCode, 303);
    t.equal(
      protectedPage.headers.location,
      '/login?return_to=%2Fportal%2Fapps',
      'signed-out visitors are sent to sign in first',
    );

    const user = remember(await signUp(app));
    const apps = await user.browser.get('/portal/apps');
    t.equal(apps.statusCode, 200);
    t.match(apps.body, new RegExp(`@${user.username}`), 'signed in as the new user');
    t.match(apps.body, /Create your first app/);
    t.equal(
      (await user.browser.get('/portal')).headers.location,
      '/portal/apps',
      'the landing page sends a signed-in user on',
    );
    t.same(unlabelledInputs(apps.body), [], 'every input of the page has a label');

    const out = await user.browser.submit({ return_to: '/portal' }, '/logout');
    t.equal(out.statusCode, 303);
    t.equal(out.headers.location, '/portal');
    t.equal((await user.browser.get('/portal/apps')).statusCode, 303, 'signed out');

    await user.browser.get('/login?return_to=%2Fportal%2Fapps');
    const back = await user.browser.submit(
      { username: user.username, password: user.password, return_to: '/portal/apps' },
      '/login',
    );
    t.equal(back.headers.location, '/portal/apps', 'the shared sign-in returns to the portal');
    t.equal((await user.browser.get('/portal/apps')).statusCode, 200);
  },
);

t.test(
  'sign-up refuses what UsersService refuses, in its words, and a form without its token',
  async (t) => {
    const browser = new Browser(app);
    await browser.get('/portal/signup');
    t.same(unlabelledInputs(browser.page), []);

    const noToken = await browser.post('/portal/signup', {
      username: 'no_token_user',
      password: 'long enough password',
    });
    t.equal(noToken.statusCode, 403);
    t.match(alertOf(noToken.body), /This form has expired/);
    t.equal((await browser.get('/portal/signup')).statusCode, 200);
    const badName = await browser.submit(
      { username: 'No Spaces', password: 'long enough password' },
      '/portal/signup',
    );
    t.equal(badName.statusCode, 400);
    t.equal(
      alertOf(badName.body),
      'Choose a username of 3 to 30 characters: lowercase letters, digits and _.',
    );
    t.match(badName.body, /value="No Spaces"/, 'what was typed is kept (escaped)');
    const short = await browser.submit(
      { username: 'short_pw_user', password: 'short' },
      '/portal/signup',
    );
    t.equal(short.statusCode, 400);
    t.match(alertOf(short.body), /^Choose a longer password: at least 8 characters\./);
    t.notMatch(short.body, /value="short"/, 'a password is never written back into the page');

    const taken = remember(await signUp(app));
    const again = await browser.submit(
      { username: taken.username, password: 'long enough password' },
      '/portal/signup',
    );
    t.equal(again.statusCode, 409);
    t.equal(alertOf(again.body), `The username ${taken.username} is taken.`);
    await t.rejects(
      app.services.users.getByUsername('no_token_user'),
      'the refused form created nobody',
    );
  },
);

t.test(
  'apps: create, list, overview with the getting-started steps and the checklist',
  async (t) => {
    const user = remember(await signUp(app));
    await user.browser.get('/portal/apps');
    const empty = await user.browser.submit({ name: '   ' }, '/portal/apps');
    t.equal(empty.statusCode, 400);
    t.equal(alertOf(empty.body), 'Give the app a name of 1 to 100 characters.');

    const appId = await createApp(user, 'Closet <sync>');
    const overview = await user.browser.get(`/portal/apps/${appId}?done=created`);
    t.equal(overview.statusCode, 200);
    t.match(overview.body, /<h1>Closet &lt;sync&gt;<\/h1>/, 'names are escaped');
    t.equal(noticeOf(overview.body), 'Your app is ready. Next: create a sandbox key.');
    t.match(overview.body, /Getting started/);
    t.match(overview.body, /<button type="submit" class="primary">Create a sandbox key<\/button>/);
    t.match(
      overview.body,
      /Create a listing with a sandbox key of this app<\/strong> <code class="muted">sandbox_listing<\/code><br>\n<span class="status-todo">Not done<\/span>/,
    );
    t.match(overview.body, /aria-current="page">Overview</);
    t.equal(
      noticeOf((await user.browser.get(`/portal/apps/${appId}?done=%3Cscript%3E`)).body),
      undefined,
      'unknown notice codes show nothing',
    );

    const list = await user.browser.get('/portal/apps');
    t.match(list.body, new RegExp(`<a href="/portal/apps/${appId}">Closet &lt;sync&gt;</a>`));
    t.match(list.body, /Sandbox only/);
    const owned = await app.services.apps.getAsMember(
      appId,
      (await app.services.users.getByUsername(user.username)).id,
    );
    t.equal(owned.name, 'Closet <sync>', 'made by AppsService for the signed-in owner');
    t.equal(owned.role, 'owner', 'its creator is its first owner');
  },
);

t.test(
  'API keys: created with chosen scopes and shown once, listed, revoked; live refused in the CLI words until the milestone',
  async (t) => {
    const user = remember(await signUp(app));
    const appId = await createApp(user);
    const keysUrl = `/portal/apps/${appId}/keys`;

    const keysPage = await user.browser.get(keysUrl);
    t.same(unlabelledInputs(keysPage.body), []);
    t.match(
      keysPage.body,
      /<input type="radio" name="env" value="sandbox" checked>/,
      'sandbox is the default',
    );

    const live = await user.browser.submit(
      { env: 'live', scopes: ['read', 'listings:write'] },
      keysUrl,
    );
    t.equal(live.statusCode, 403);
    const cli = await COMMANDS['key create']!.run(
      app.services,
      parseArgs(['--app', appId, '--env', 'live']).flags,
    ).then(
      () => 'created',
      (err: Error) => err.message,
    );
    t.equal(
      alertOf(live.body),
      cli,
      'the page refuses a live key with the words of the CLI (same service)',
    );
    t.equal(
      cli,
      'Live keys need every go-live milestone; not done yet: sandbox_listing. Create a listing with a sandbox key of this app first.',
    );
    t.match(
      live.body,
      /<input type="radio" name="env" value="live" checked>/,
      'the form keeps the choice',
    );

    const none = await user.browser.submit({ env: 'sandbox' }, keysUrl);
    t.equal(none.statusCode, 400);
    t.equal(
      alertOf(none.body),
      'Choose at least one scope.',
      'no box ticked is no scope, not the default scopes',
    );

    const created = await user.browser.submit({ env: 'sandbox', scopes: ['read'] }, keysUrl);
    t.equal(created.statusCode, 201);
    const key = shownSecret(created.body, 'new-key')!;
    secrets.push(key);
    t.match(key, /^svc_sandbox_[A-Za-z0-9_-]{43}$/);
    t.match(created.body, /Copy it now: you will not see this again\./);
    t.match(
      created.body,
      /<button type="button" class="copy" data-copy="new-key" aria-label="[^"]+" hidden>Copy<\/button>/,
      'the copy button waits for the script (hidden without it)',
    );
    t.match(
      unescapeHtml(created.body),
      `curl -s -X POST 'http://127.0.0.1:3000/api/v1/listings' -H 'Authorization: Bearer ${key}'`,
      'the curl line carries the key and BASE_URL',
    );
    t.equal(created.headers['cache-control'], 'no-store', 'a page with a secret is never cached');
    t.match(String(created.headers['content-security-policy']), /frame-ancestors 'none'/);
    t.equal(created.headers['x-frame-options'], 'DENY');

    const me = await api('GET', '/api/v1/me', key);
    t.equal(me.statusCode, 200, 'the key works');
    t.equal(
      (await api('POST', '/api/v1/listings', key, { title: 'Needs write', price_cents: 100 }))
        .statusCode,
      403,
      'with the scopes chosen, no more',
    );

    // The last-used time is written in the background (best effort): wait for it as a client would.
    await waitUntil(
      'the last-used time',
      async () => (await app.services.keys.list(appId))[0]?.lastUsedAt,
    );
    const listed = await user.browser.get(keysUrl);
    t.notOk(listed.body.includes(key), 'the key is not shown again');
    const row = new RegExp(
      `<code>${key.slice(0, 18)}…</code>[\\s\\S]*?sandbox[\\s\\S]*?<td>read</td>\\n<td><time datetime="[^"]+">[^<]+ UTC</time></td>\\n<td>${user.username}</td>\\n<td><time datetime="[^"]+">[^<]+ UTC</time></td>\\n<td>Active</td>`,
    );
    t.match(
      listed.body,
      row,
      'listed with its prefix, scopes, created time, maker, last-used time',
    );

    const keyId = /name="key_id" value="([^"]+)"/.exec(listed.body)![1]!;
    const revoked = await user.browser.submit({ key_id: keyId }, `${keysUrl}/revoke`);
    t.equal(revoked.statusCode, 303);
    t.equal(revoked.headers.location, `${keysUrl}?done=revoked`);
    t.equal((await api('GET', '/api/v1/me', key)).statusCode, 401, 'revoked at once');
    const after = await user.browser.get(revoked.headers.location!);
    t.equal(noticeOf(after.body), 'The key was revoked. Requests with it now get 401.');
    t.match(after.body, /<td>Revoked <time/);
    t.notMatch(after.body, /name="key_id"/, 'a revoked key has no revoke button');

    const writer = await newSandboxKey(user, appId);
    t.equal(
      (
        await api('POST', '/api/v1/listings', writer, {
          title: 'First sandbox listing',
          price_dollars: 12.5,
        })
      ).statusCode,
      201,
    );
    const liveNow = await user.browser.act(keysUrl, keysUrl, { env: 'live', scopes: ['read'] });
    t.equal(liveNow.statusCode, 201, 'after the sandbox_listing milestone, live keys are created');
    const liveKey = shownSecret(liveNow.body, 'new-key')!;
    secrets.push(liveKey);
    t.match(liveKey, /^svc_live_/);
    t.match(
      unescapeHtml(liveNow.body),
      `curl -s 'http://127.0.0.1:3000/api/v1/me' -H 'Authorization: Bearer ${liveKey}'`,
    );
  },
);

t.test(
  'OAuth settings: redirect URIs under the rules of docs/oauth.md, client secret created and rotated, shown once',
  async (t) => {
    const user = remember(await signUp(app));
    const appId = await createApp(user);
    const oauthUrl = `/portal/apps/${appId}/oauth`;
    const page = await user.browser.get(oauthUrl);
    t.same(unlabelledInputs(page.body), []);
    t.match(page.body, /This app has no client secret yet/);

    for (const bad of [
      'http://example.com/cb',
      'https://example.com/cb#frag',
      'not a url',
      'https://user:pw@example.com/cb',
    ]) {
      const refused = await user.browser.act(oauthUrl, `${oauthUrl}/redirect-uris`, { uri: bad });
      let expected = '';
      try {
        checkRedirectUri(bad);
      } catch (err) {
        expected = (err as Error).message;
      }
      t.equal(refused.statusCode, 400, `refused: ${bad}`);
      t.equal(alertOf(refused.body), expected, 'in the words of checkRedirectUri');
    }
    for (const good of [
      'https://example.com/oauth/callback',
      'http://localhost:8080/cb',
      'http://127.0.0.1/cb',
    ]) {
      const added = await user.browser.act(oauthUrl, `${oauthUrl}/redirect-uris`, { uri: good });
      t.equal(added.statusCode, 303, `added: ${good}`);
      t.equal(added.headers.location, `${oauthUrl}?done=added`);
    }
    t.same((await app.services.apps.show(appId)).redirect_uris, [
      'https://example.com/oauth/callback',
      'http://localhost:8080/cb',
      'http://127.0.0.1/cb',
    ]);

    const removed = await user.browser.act(oauthUrl, `${oauthUrl}/redirect-uris/remove`, {
      uri: 'http://127.0.0.1/cb',
    });
    t.equal(removed.headers.location, `${oauthUrl}?done=removed`);
    const missing = await user.browser.act(oauthUrl, `${oauthUrl}/redirect-uris/remove`, {
      uri: 'http://127.0.0.1/cb',
    });
    t.equal(missing.statusCode, 404);
    t.equal(alertOf(missing.body), 'That redirect URI is not registered.');
    t.same((await app.services.apps.show(appId)).redirect_uris, [
      'https://example.com/oauth/callback',
      'http://localhost:8080/cb',
    ]);

    const created = await user.browser.act(oauthUrl, `${oauthUrl}/secret`);
    t.equal(created.statusCode, 201);
    const secret = shownSecret(created.body, 'client-secret')!;
    secrets.push(secret);
    t.match(secret, /^svc_cs_/);
    t.match(created.body, /you will not see this again/);
    const token = await app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        grant_type: 'authorization_code',
        code: 'svc_ac_unknown',
        redirect_uri: 'http://localhost:8080/cb',
        client_id: appId,
        client_secret: secret,
      }).toString(),
    });
    t.equal(
      JSON.parse(token.body).error,
      'invalid_grant',
      'the secret authenticates the client (the made-up code is what fails)',
    );

    const shown = await user.browser.get(oauthUrl);
    t.notOk(shown.body.includes(secret), 'not shown again');
    t.match(shown.body, new RegExp(`Active secret <code>${secret.slice(0, 13)}…</code>`));
    const unconfirmed = await user.browser.submit({}, `${oauthUrl}/secret`);
    t.equal(
      unconfirmed.statusCode,
      400,
      'rotating asks for confirmation (the box is required in the form too)',
    );
    const rotated = await user.browser.act(oauthUrl, `${oauthUrl}/secret`, { confirm: 'rotate' });
    t.equal(rotated.statusCode, 201);
    const next = shownSecret(rotated.body, 'client-secret')!;
    secrets.push(next);
    t.not(next, secret);
    const { AppsRepository } = await import('../../src/apps/apps-repository.ts');
    t.equal(
      await new AppsRepository(app.db).activeClientSecretHash(appId),
      hashSecret(next),
      'the new secret is the active one; only its hash is stored',
    );
  },
);

t.test('go-live checklist and the production request granted with admin app approve', async (t) => {
  const user = remember(await signUp(app));
  const appId = await createApp(user);
  const overviewUrl = `/portal/apps/${appId}`;

  const early = await user.browser.act(overviewUrl, `${overviewUrl}/production-request`);
  t.equal(early.statusCode, 403);
  t.equal(
    alertOf(early.body),
    'Production approval needs every go-live milestone; not done yet: sandbox_listing. Create a listing with a sandbox key of this app first.',
  );

  const key = await newSandboxKey(user, appId);
  t.equal(
    (
      await api('POST', '/api/v1/listings/batch', key, {
        items: [{ title: 'Batch item one', price_cents: 500 }],
      })
    ).statusCode,
    200,
  );
  const done = await user.browser.get(overviewUrl);
  t.match(
    done.body,
    /<span class="status-ok">Done<\/span> <time datetime="/,
    'the milestone is done, with when',
  );
  t.notMatch(done.body, /Getting started/, 'the getting-started steps are gone once done');
  t.match(done.body, /<span class="status-ok">Unlocked<\/span>/);

  const requested = await user.browser.submit({}, `${overviewUrl}/production-request`);
  t.equal(requested.statusCode, 303);
  t.equal(requested.headers.location, `${overviewUrl}?done=requested`);
  const pending = await user.browser.get(requested.headers.location!);
  t.match(pending.body, /<span class="status-wait">Requested<\/span> <time/);
  t.notMatch(pending.body, /production-request/, 'no second request button');
  const listedForOperators = (await COMMANDS['app requests']!.run(app.services, new Map())) as {
    requests: { id: string; owner: string }[];
  };
  t.match(
    listedForOperators.requests,
    [{ id: appId, owner: user.username }],
    'operators see it in `admin app requests`',
  );

  await COMMANDS['app approve']!.run(app.services, parseArgs(['--app', appId]).flags);
  const approved = await user.browser.get(overviewUrl);
  t.match(
    approved.body,
    /Production approval<\/strong> \(needed for live webhook endpoints\)<br><span class="status-ok">Approved<\/span> <time/,
  );
  const list = (await COMMANDS['app requests']!.run(app.services, new Map())) as {
    requests: { id: string }[];
  };
  t.notOk(
    list.requests.some((r) => r.id === appId),
    'an approved app leaves the list',
  );
  const again = await user.browser.submit({}, `${overviewUrl}/production-request`);
  t.equal(again.statusCode, 409);
  t.equal(alertOf(again.body), 'This app is already approved for production.');
});

t.test(
  'every page: no framing, no caching, scripts and styles only from this server',
  async (t) => {
    const user = remember(await signUp(app));
    const appId = await createApp(user);
    const pages = [
      '/portal',
      '/portal/signup',
      '/portal/apps',
      ...['', '/keys', '/oauth', '/webhooks', '/inventory'].map((p) => `/portal/apps/${appId}${p}`),
    ];
    for (const url of pages) {
      const res = await (
        url === '/portal' || url === '/portal/signup' ? new Browser(app) : user.browser
      ).get(url);
      t.equal(res.statusCode, 200, url);
      const csp = String(res.headers['content-security-policy']);
      t.match(csp, /default-src 'none'; script-src 'self'; style-src 'self';/, `${url}: CSP`);
      t.match(csp, /frame-ancestors 'none'/);
      t.equal(res.headers['x-frame-options'], 'DENY');
      t.equal(res.headers['cache-control'], 'no-store');
      t.match(
        res.body,
        /<link rel="stylesheet" href="\/assets\/portal.css">\n<script src="\/assets\/portal.js" defer><\/script>/,
      );
      t.notMatch(
        res.body,
        /<script>|https?:\/\/(?!127\.0\.0\.1)[a-z0-9.-]+\/[^"' ]*\.(js|css)/i,
        'no inline script, nothing from a CDN',
      );
      t.same(unlabelledInputs(res.body), [], `${url}: every input has a label`);
    }
    const css = await app.inject({ method: 'GET', url: '/assets/portal.css' });
    t.equal(css.statusCode, 200);
    t.match(css.headers['content-type'], /^text\/css/);
    const js = await app.inject({ method: 'GET', url: '/assets/portal.js' });
    t.match(js.headers['content-type'], /^text\/javascript/);
    t.match(js.body, /navigator\.clipboard\.writeText/);
  },
);

t.test("every form is refused without its CSRF token, or with another browser's", async (t) => {
  const user = remember(await signUp(app));
  const appId = await createApp(user);
  const other = remember(await signUp(app));
  await other.browser.get('/portal/apps');
  const foreignToken = csrfOf(other.browser.page);

  const posts: [string, Record<string, string | string[]>][] = [
    ['/portal/apps', { name: 'Sneaky app' }],
    [`/portal/apps/${appId}/production-request`, {}],
    [`/portal/apps/${appId}/keys`, { env: 'sandbox', scopes: ['read'] }],
    [`/portal/apps/${appId}/keys/revoke`, { key_id: '00000000-0000-4000-8000-000000000000' }],
    [`/portal/apps/${appId}/oauth/redirect-uris`, { uri: 'https://evil.example/cb' }],
    [`/portal/apps/${appId}/oauth/redirect-uris/remove`, { uri: 'https://evil.example/cb' }],
    [`/portal/apps/${appId}/oauth/secret`, {}],
    [`/portal/apps/${appId}/webhooks`, { env: 'sandbox', url: 'https://example.com/hook' }],
    [`/portal/apps/${appId}/webhooks/00000000-0000-4000-8000-000000000000/ping`, {}],
    [
      `/portal/apps/${appId}/webhooks/00000000-0000-4000-8000-000000000000/redeliver`,
      { delivery_id: '0'.repeat(32) },
    ],
  ];
  for (const [url, form] of posts) {
    const missing = await user.browser.post(url, form);
    t.equal(missing.statusCode, 403, `no token: ${url}`);
    t.match(missing.body, /This form has expired/);
    const forged = await user.browser.post(url, { ...form, csrf_token: foreignToken });
    t.equal(forged.statusCode, 403, `another browser's token: ${url}`);
  }
  t.equal(
    (await app.services.apps.listOwned((await app.services.users.getByUsername(user.username)).id))
      .length,
    1,
    'no app was made',
  );
  t.same(await app.services.keys.list(appId), [], 'no key was made');
  t.same((await app.services.apps.show(appId)).redirect_uris, [], 'no redirect URI was added');
  t.equal(await app.services.apps.clientSecretInfo(appId), null, 'no secret was made');
  t.same(await app.services.endpoints.list(appId), [], 'no endpoint was made');
});

t.test(
  "another user's app is 404 on every page and every action, and nothing of it changes",
  async (t) => {
    const owner = remember(await signUp(app));
    const appId = await createApp(owner);
    const ownerKey = await newSandboxKey(owner, appId);
    const keyId = (await app.services.keys.list(appId))[0]!.id;

    const intruder = remember(await signUp(app));
    const intruderApp = await createApp(intruder);
    for (const page of [
      '',
      '/keys',
      '/oauth',
      '/webhooks',
      '/inventory',
      '/webhooks/00000000-0000-4000-8000-000000000000',
    ]) {
      const res = await intruder.browser.get(`/portal/apps/${appId}${page}`);
      t.equal(res.statusCode, 404, `GET ${page || '/'}`);
      t.match(res.headers['content-type'], /^text\/html/, 'a page, not JSON');
      t.notMatch(res.body, new RegExp(owner.username), 'nothing about the app or its owner');
    }
    t.equal((await intruder.browser.get('/portal/apps/not-a-uuid')).statusCode, 404);
    t.equal((await intruder.browser.get('/portal/no-such-page')).statusCode, 404);

    await intruder.browser.get('/portal/apps');
    const posts: [string, Record<string, string | string[]>][] = [
      [`/portal/apps/${appId}/production-request`, {}],
      [`/portal/apps/${appId}/keys`, { env: 'sandbox', scopes: ['read'] }],
      [`/portal/apps/${appId}/keys/revoke`, { key_id: keyId }],
      [`/portal/apps/${appId}/oauth/redirect-uris`, { uri: 'https://evil.example/cb' }],
      [`/portal/apps/${appId}/oauth/secret`, {}],
      [`/portal/apps/${appId}/webhooks`, { env: 'sandbox', url: 'https://example.com/hook' }],
    ];
    for (const [url, form] of posts)
      t.equal(
        (await intruder.browser.act('/portal/apps', url, form)).statusCode,
        404,
        `POST ${url}`,
      );

    // The owner's key through the intruder's own app: still not found.
    const viaOwnApp = await intruder.browser.act(
      `/portal/apps/${intruderApp}/keys`,
      `/portal/apps/${intruderApp}/keys/revoke`,
      { key_id: keyId },
    );
    t.equal(viaOwnApp.statusCode, 404);
    t.equal(alertOf(viaOwnApp.body), `No API key with id ${keyId}.`);

    t.equal(
      (await api('GET', '/api/v1/me', ownerKey)).statusCode,
      200,
      "the owner's key still works",
    );
    t.equal((await app.services.keys.list(appId)).length, 1, 'no key was added');
    t.same((await app.services.apps.show(appId)).redirect_uris, []);
    t.equal(await app.services.apps.clientSecretInfo(appId), null);
    t.equal((await app.services.apps.get(appId)).productionRequestedAt, null);
  },
);

t.test('secrets and passwords are never in a URL or a log line', async (t) => {
  t.ok(secrets.length >= 7, `${secrets.length} secrets were shown along the way`);
  const output = log();
  t.ok(
    output.length > 10_000 && output.includes('/portal/apps'),
    'the log holds the requests (trace level)',
  );
  for (const secret of [...secrets, ...passwords])
    t.notOk(output.includes(secret), `not in the log: ${secret.slice(0, 12)}…`);

  // Every URL requested or redirected to in this file, by every browser above.
  t.ok(Browser.urls.length > 50);
  const leaks = Browser.urls.filter(
    (url) =>
      [...secrets, ...passwords].some(
        (s) => url.includes(s) || url.includes(encodeURIComponent(s)),
      ) || /svc_[a-z]+_/.test(url),
  );
  t.same(leaks, [], 'no URL holds a secret or a password');
});
