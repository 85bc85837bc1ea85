/**
 * One redactor for every log (src/lib/redact.ts, issue #32): a credential pasted anywhere in a
 * request (a query value, a cursor, a path segment, percent-encoded, a `;matrix` parameter, an
 * unknown JSON field's name quoted in the error) and the value of any secret-looking parameter
 * (after percent-decoding) reach neither the request log (so neither the portal's Request logs
 * page nor `admin app logs`) nor the stdout log. Each form of the table is sent with the app's
 * real key, and all three places are searched for what was sent.
 *
 * Issue #43 item 5: the same after decoding: a prefix percent-encoded twice, a full-width or
 * entity-encoded underscore, a parameter name spelled with look-alike letters.
 */
import t from 'tap';
import { COMMANDS } from '../../src/cli/admin.ts';
import { redactUrl, REDACTED } from '../../src/lib/redact.ts';
import { appWithLog, createApp, signUp, createKeyInPortal } from '../portal/support.ts';

const { app, log } = await appWithLog(t);
const owner = await signUp(app);
const appId = await createApp(owner, 'Redacted app');
const key = await createKeyInPortal(owner, appId, { name: 'Importer' });
/** The part of the key that lets someone act as it. */
const keySecret = key.slice('svc_sandbox_'.length);
const refreshLike = `svc_rt_${'R'.repeat(43)}`;
const plain = 'hunter2-plain-secret-value';
/** The key with its prefix's underscores written as `underscore`; the secret part as it is. */
const keyWith = (underscore: string) => `svc${underscore}sandbox${underscore}${keySecret}`;

/** [what it is, method, url, body]: every form the issue lists, and more. */
const FORMS: [string, 'GET' | 'POST', string, unknown?][] = [
  ['a key as the search word', 'GET', `/api/v1/listings?q=${key}`],
  ['a refresh token as the cursor', 'GET', `/api/v1/listings?cursor=${refreshLike}`],
  ['a key as a path segment', 'GET', `/api/v1/listings/${key}`],
  [
    'a key percent-encoded in the path',
    'GET',
    `/api/v1/listings/${encodeURIComponent(key).replaceAll('_', '%5F')}`,
  ],
  ['a key in a ;matrix parameter', 'GET', `/api/v1/listings;x=${key}`],
  ['a ;matrix parameter named like a secret', 'GET', `/api/v1/listings;api_key=${plain}`],
  ['a key as an unknown JSON field', 'POST', '/api/v1/listings', { title: 'x', [key]: 1 }],
  ...['api_key', 'apikey', 'pwd', 'pass', 'jwt', 'bearer', 'sig', '%74oken', 'access%5Ftoken'].map(
    (name): [string, 'GET', string] => [`?${name}=`, 'GET', `/api/v1/listings?${name}=${plain}`],
  ),
  // Issue #43 item 5: the same after decoding.
  ['a key encoded twice as the search word', 'GET', `/api/v1/listings?q=${keyWith('%255F')}`],
  ['a key encoded twice as the cursor', 'GET', `/api/v1/listings?cursor=${keyWith('%255F')}`],
  ['a key encoded three times in the path', 'GET', `/api/v1/listings/${keyWith('%25255F')}`],
  ['a key with full-width underscores', 'GET', `/api/v1/listings?q=${keyWith('%EF%BC%BF')}`],
  ['a key with &#95; underscores, raw', 'GET', `/api/v1/listings?q=${keyWith('&#95;')}`],
  ['a key with &#x5f; underscores in the path', 'GET', `/api/v1/listings/${keyWith('&#x5f;')}`],
  [
    'a key with &lowbar; underscores, encoded',
    'GET',
    `/api/v1/listings?q=${encodeURIComponent(keyWith('&lowbar;'))}`,
  ],
  [
    'a key encoded twice as an unknown JSON field',
    'POST',
    '/api/v1/listings',
    { title: 'x', [keyWith('%255F')]: 1 },
  ],
  // Issue 55: a key as a query parameter's name, raw, percent-encoded, or inside brackets.
  ['a key as a parameter name', 'GET', `/api/v1/listings?${key}=1`],
  ['a key percent-encoded as a parameter name', 'GET', `/api/v1/listings?${keyWith('%5F')}=x`],
  ['a key inside a parameter name', 'GET', `/api/v1/listings?q[${key}]=x`],
  ...['t%D0%BEken', '%EF%BD%90assword', 'ｐassword', 's%CE%B9g', 'tok%E2%80%8Ben', 'pa%2573s'].map(
    (name): [string, 'GET', string] => [`?${name}=`, 'GET', `/api/v1/listings?${name}=${plain}`],
  ),
];

const responses: Awaited<ReturnType<typeof app.inject>>[] = [];
for (const [, method, url, body] of FORMS)
  responses.push(
    await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as object }),
    }),
  );
await app.requestLog!.flush();

t.test('every form was answered, and logged for the app', async (t) => {
  t.ok(
    responses.every((r) => r.statusCode < 500),
    `statuses: ${responses.map((r) => r.statusCode).join(' ')}`,
  );
  const stored = await app.services.requestLogs.list(appId, { env: 'sandbox', limit: 100 });
  const ids = new Set(stored.items.map((r) => r.request_id));
  t.ok(
    responses.every((r) => ids.has(String(r.headers['x-request-id']))),
    'each request is in the request log',
  );
});

t.test('nothing that acts as the credential is stored, shown or printed', async (t) => {
  const stored = JSON.stringify(
    (await app.services.requestLogs.list(appId, { env: 'sandbox', limit: 100 })).items,
  );
  const page = (await owner.browser.get(`/portal/apps/${appId}/logs?env=sandbox`)).body;
  const cli = JSON.stringify(
    await COMMANDS['app logs']!.run(
      app.services,
      new Map([
        ['app', [appId]],
        ['limit', ['100']],
      ]),
    ),
  );
  // Each request's own page and `admin app logs --id`, which show its bodies (issue #59 item 6).
  const listed = (await app.services.requestLogs.list(appId, { env: 'sandbox', limit: 100 })).items;
  const details = JSON.stringify(
    await Promise.all(listed.map((row) => app.services.requestLogs.get(appId, row.id))),
  );
  const detailPages = (
    await Promise.all(
      listed.map((row) => owner.browser.get(`/portal/apps/${appId}/logs/${row.id}`)),
    )
  )
    .map((res) => res.body)
    .join('\n');
  const stdout = log();
  for (const [where, text] of [
    ['the request log', stored],
    ['the bodies kept', details],
    ["the requests' pages", detailPages],
    ['the portal page', page],
    ['admin app logs', cli],
    ['the stdout log', stdout],
  ] as const) {
    t.notOk(text.includes(keySecret), `${where}: not the key`);
    t.notOk(text.includes(encodeURIComponent(keySecret)), `${where}: not the key, encoded`);
    t.notOk(text.includes(refreshLike.slice(7)), `${where}: not the refresh token`);
    t.notOk(text.includes(plain), `${where}: no value of a secret-named parameter`);
    t.ok(text.includes(REDACTED), `${where}: the marker shows where something was`);
  }
  t.match(stored, 'svc_sandbox_REDACTED', 'the prefix stays: it says what was pasted');
});

t.test('the redactor, form by form', async (t) => {
  const table: [string, string][] = [
    [`/l?q=${key}`, '/l?q=svc_sandbox_REDACTED'],
    [`/l/${key}`, '/l/svc_sandbox_REDACTED'],
    [`/l;x=${key};token=abc`, '/l;x=svc_sandbox_REDACTED;token=REDACTED'],
    ['/l?%74oken=abc&limit=2', '/l?%74oken=REDACTED&limit=2'],
    ['/l?APIKEY=abc', '/l?APIKEY=REDACTED'],
    [`/l?note=x_${key}`, '/l?note=x_svc_sandbox_REDACTED'],
    [
      '/l?q=shoes&limit=2&cursor=2026-01-01T00%3A00%3A00Z',
      '/l?q=shoes&limit=2&cursor=2026-01-01T00%3A00%3A00Z',
    ],
    ['/l?%E0%A4%A=1', '/l?%E0%A4%A=1'],
    // Issue #43 item 5: decoded (at most three rounds), then compatibility and look-alike folds.
    [`/l?q=${keyWith('%255F')}`, '/l?q=svc_sandbox_REDACTED'],
    [`/l/${keyWith('%25255F')}`, '/l/svc_sandbox_REDACTED'],
    [`/l?q=${keyWith('＿')}`, '/l?q=svc_sandbox_REDACTED'],
    [`/l?q=${keyWith('&#95;')}&limit=2`, '/l?q=svc_sandbox_REDACTED&limit=2'],
    [`/l/${keyWith('&#x5F;')}`, '/l/svc_sandbox_REDACTED'],
    [`/l/${keyWith('&lowbar;')}`, '/l/svc_sandbox_REDACTED'],
    [`/l?q=${encodeURIComponent(keyWith('&lowbar;'))}`, '/l?q=svc_sandbox_REDACTED'],
    [`/l?q=${keyWith('_').replace('a', '%D0%B0')}`, '/l?q=svc_sandbox_REDACTED'],
    ['/l?t%D0%BEken=abc&limit=2', '/l?t%D0%BEken=REDACTED&limit=2'],
    ['/l?ｐassword=abc', '/l?ｐassword=REDACTED'],
    ['/l?%CE%A4OKEN=abc', '/l?%CE%A4OKEN=REDACTED'],
    ['/l?to%C2%ADken=abc', '/l?to%C2%ADken=REDACTED'],
    // Issue 55: a credential as a parameter's name.
    [`/l?${key}=1&limit=2`, '/l?svc_sandbox_REDACTED=1&limit=2'],
    [`/l?${keyWith('%5F')}=x`, '/l?svc_sandbox_REDACTED=x'],
    [`/l?q[${key}]=x`, '/l?q%5Bsvc_sandbox_REDACTED%5D=x'],
    [`/l;${key}=1`, '/l;svc_sandbox_REDACTED=1'],
    // Plain text stays as sent, look-alikes and entities included.
    ['/l?q=%D0%BF%D0%B0%D0%BB%D1%8C%D1%82%D0%BE', '/l?q=%D0%BF%D0%B0%D0%BB%D1%8C%D1%82%D0%BE'],
    ['/l?q=rock%26roll&brand=H%26M', '/l?q=rock%26roll&brand=H%26M'],
    ['/l?q=caf%C3%A9&size=%EF%BC%94', '/l?q=caf%C3%A9&size=%EF%BC%94'],
  ];
  for (const [url, expected] of table) t.equal(redactUrl(url), expected, url);
});
