/**
 * Bad input gets a 400 naming the parameter, never a 500 (issue #42 item 4): text and times that
 * PostgreSQL refuses must be refused at the boundary, before a statement fails on them.
 *
 * - U+0000 (%00) in any query parameter of any route, and in any field of a form body: PostgreSQL
 *   text cannot hold it (22021). One check in the validation plugin (src/lib/validator.ts).
 * - Times PostgreSQL's timestamptz refuses (the year 0000, an offset of 16 hours or more, a leap
 *   second past midnight) in every cursor and `updated_since`. One check (src/lib/timestamps.ts).
 * - A forged search cursor whose sort key is out of its column's range (a rank that is not a
 *   real, a time out of range). Checked when decoded (src/listings/listing-cursor.ts).
 *
 * Each on whichever database the suite runs on (PGlite, or PostgreSQL with DATABASE_URL).
 */
import t, { type Test } from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { alertOf, createApp, signUp } from '../portal/support.ts';

// SYNC_SETTLE_MS 0: sort=updated_at lists a change at once, so its cursor can be forged here.
const app = await buildTestApp(t, { RATE_LIMIT_MAX: '1000000', SYNC_SETTLE_MS: '0' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const owner = await signUp(app);
const appId = await createApp(owner);
await app.services.apps.addRedirectUri(appId, 'https://client.example.com/callback');
const { client_secret: clientSecret } = await app.services.apps.rotateClientSecret(appId);

for (const [i, price] of [1500, 2500, 3500].entries()) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(key),
    payload: {
      title: `Blue denim jacket ${i}`,
      price_cents: price,
      status: 'active',
      cover_image_url: 'https://images.example.com/jacket.jpg',
    },
  });
  if (res.statusCode !== 201) throw new Error(`listing not created: ${res.body}`);
}

const OUT_OF_RANGE = [
  '0000-01-01T00:00:00Z', // no year zero
  '2024-01-01T00:00:00+16:00', // PostgreSQL reads offsets up to ±15:59
  '2024-01-01T00:00:00-23:59',
  '2024-12-31T23:59:60.5Z', // a leap second past 24:00:00
];

interface ApiCase {
  url: string;
  path: string;
  credential?: string;
}

/** Asserts the error envelope of a 400 whose details name `path`. */
function assertRefused(
  t: Test,
  res: { statusCode: number; body: string; headers: Record<string, unknown> },
  path: string,
  label: string,
) {
  t.equal(res.statusCode, 400, `${label}: 400`);
  const body = JSON.parse(res.body) as {
    error?: { code?: string; details?: { path: string }[] };
    meta?: { request_id?: string };
  };
  t.equal(body.error?.code, 'validation_error', `${label}: validation_error`);
  t.ok(
    body.error?.details?.some((d) => d.path === path),
    // The path as JSON: a raw U+0000 in a test point's name makes the TAP log binary to grep.
    `${label}: details name ${JSON.stringify(path)} (${JSON.stringify(body.error?.details)})`,
  );
  t.equal(res.headers['x-request-id'], body.meta?.request_id, `${label}: x-request-id`);
}

async function expectApi400(t: Test, cases: ApiCase[]) {
  for (const c of cases) {
    const res = await app.inject({
      method: 'GET',
      url: c.url,
      headers: c.credential ? bearer(c.credential) : {},
    });
    assertRefused(t, res, c.path, c.url);
  }
}

const enc = encodeURIComponent;

t.test('U+0000 in a query parameter of the API: 400 naming it', async (t) => {
  const cases: ApiCase[] = [];
  // Those that reached SQL as text (500 before), with and without a search.
  for (const name of ['q', 'category', 'brand', 'size', 'color', 'tag']) {
    cases.push({ url: `/api/v1/listings?${name}=a%00b`, path: `/query/${name}` });
    cases.push({ url: `/api/v1/listings?${name}=%00`, path: `/query/${name}`, credential: key });
    if (name !== 'q')
      cases.push({ url: `/api/v1/listings?q=denim&${name}=a%00b`, path: `/query/${name}` });
  }
  cases.push(
    { url: '/api/v1/listings?tag=denim&tag=a%00b', path: '/query/tag' },
    { url: '/api/v1/listings?cursor=a%00b', path: '/query/cursor' },
    { url: '/api/v1/listings?unknown=%00', path: '/query/unknown' },
    { url: '/api/v1/listings?a%00b=1', path: '/query/a\u0000b' },
    { url: '/api/v1/events?cursor=a%00b', path: '/query/cursor', credential: key },
    { url: '/api/v1/me?x=%00', path: '/query/x', credential: key },
    { url: '/api/v1/profiles/someone?x=%00', path: '/query/x' },
    { url: '/api/v1/health?x=%00', path: '/query/x' },
  );
  await expectApi400(t, cases);
});

t.test('times PostgreSQL refuses, in every cursor and updated_since of the API', async (t) => {
  const cases: ApiCase[] = [];
  for (const value of OUT_OF_RANGE) {
    cases.push(
      { url: `/api/v1/listings?cursor=${enc(value)}`, path: '/query/cursor' },
      { url: `/api/v1/listings?cursor=${enc(value)}`, path: '/query/cursor', credential: key },
      {
        url: `/api/v1/listings?sort=updated_at&updated_since=${enc(value)}`,
        path: '/query/updated_since',
      },
      { url: `/api/v1/events?cursor=${enc(value)}`, path: '/query/cursor', credential: key },
      { url: `/api/v1/events?wait=0&cursor=${enc(value)}`, path: '/query/cursor', credential: key },
    );
  }
  await expectApi400(t, cases);

  // The edges PostgreSQL reads are still read (the documented range).
  for (const value of [
    '0001-01-01T00:00:00Z',
    '2024-01-01T00:00:00+15:59',
    '9999-12-31T23:59:59-15:59',
  ]) {
    for (const url of [
      `/api/v1/listings?cursor=${enc(value)}`,
      `/api/v1/listings?sort=updated_at&updated_since=${enc(value)}`,
      `/api/v1/events?cursor=${enc(value)}`,
    ]) {
      const res = await app.inject({ url, headers: bearer(key) });
      t.equal(res.statusCode, 200, `${url}: 200`);
    }
  }
});

/** A search's first next_cursor, decoded. */
async function searchCursor(query: string): Promise<{ k: Record<string, unknown>; p?: string }> {
  const res = await app.inject({ url: `/api/v1/listings?${query}&limit=1`, headers: bearer(key) });
  const next = (JSON.parse(res.body) as { meta: { next_cursor: string | null } }).meta.next_cursor;
  if (!next) throw new Error(`no next_cursor for ${query}: ${res.body}`);
  return JSON.parse(Buffer.from(next, 'base64url').toString('utf8'));
}

t.test('a forged search cursor whose sort key is out of range: 400 naming cursor', async (t) => {
  const forged: [string, Record<string, unknown>][] = [
    ['q=denim&sort=newest', { k: { publishedAt: '0000-01-01T00:00:00Z' } }],
    ['q=denim&sort=newest', { k: { publishedAt: '2024-01-01T00:00:00+16:00' } }],
    ['q=denim&sort=price_asc', { k: { priceCents: 2 ** 31 } }],
    ['q=denim&sort=price_asc', { k: { publishedAt: '0000-01-01T00:00:00Z' } }],
    ['q=denim&sort=price_desc', { k: { priceCents: 0 } }],
    ['q=denim&sort=price_desc', { k: { priceCents: 1.5 } }],
    ['sort=updated_at', { k: { updatedAt: '0000-01-01T00:00:00Z' } }],
    ['sort=updated_at', { k: { id: 'not-a-uuid' } }],
    ['sort=updated_at', { k: { id: 'ffffffff-ffff-ffff-ffff-fffffffffffff' } }],
    ['q=denim&sort=relevance', { k: { rank: '1e39' } }], // overflows a real
    ['q=denim&sort=relevance', { k: { rank: '3.4028236e38' } }],
    ['q=denim&sort=relevance', { k: { rank: '1e-46' } }], // underflows to zero
    ['q=denim&sort=relevance', { k: { rank: `0.${'0'.repeat(60)}1` } }],
    ['q=denim&sort=relevance', { k: { rank: 'NaN' } }],
    ['q=denim&sort=relevance', { k: { rank: 0.5 } }],
    ['q=denim&sort=relevance', { k: { publishedAt: '2024-12-31T23:59:60.5Z' } }],
    ['q=denim&sort=relevance', { p: '0000-01-01T00:00:00Z' }],
    ['q=denim&sort=relevance', { p: '2024-01-01T00:00:00+20:00' }],
  ];
  for (const [query, change] of forged) {
    const real = await searchCursor(query);
    const cursor = Buffer.from(
      JSON.stringify({ ...real, ...change, k: { ...real.k, ...(change.k as object) } }),
    ).toString('base64url');
    const res = await app.inject({
      url: `/api/v1/listings?${query}&limit=1&cursor=${cursor}`,
      headers: bearer(key),
    });
    assertRefused(t, res, '/query/cursor', `${query} with ${JSON.stringify(change)}`);
  }
  // The edges of a real: still read.
  for (const rank of ['3.4028235e38', '1e-45', '0', '-0']) {
    const real = await searchCursor('q=denim&sort=relevance');
    const cursor = Buffer.from(JSON.stringify({ ...real, k: { ...real.k, rank } })).toString(
      'base64url',
    );
    const res = await app.inject({
      url: `/api/v1/listings?q=denim&sort=relevance&limit=1&cursor=${cursor}`,
      headers: bearer(key),
    });
    t.equal(res.statusCode, 200, `rank ${rank}: 200`);
  }
});

/** An HTML 400 of the page's own making: no 500 page, no stack, no SQL. */
function assertPage400(
  t: Test,
  res: { statusCode: number; body: string; headers: Record<string, unknown> },
  label: string,
) {
  t.equal(res.statusCode, 400, `${label}: 400`);
  t.match(String(res.headers['content-type']), /^text\/html/, `${label}: a page`);
  t.notMatch(res.body, /Something went wrong|invalid byte sequence|out of range|at .*\.ts:/, label);
}

t.test("the portal's pages: the page's own 400, never a 500", async (t) => {
  const base = `/portal/apps/${appId}`;
  const uuid = '00000000-0000-4000-8000-000000000000';
  const timePages: [string, string][] = [];
  for (const value of [...OUT_OF_RANGE, '1', '2024', '+275760-09-13T00:00:00Z']) {
    timePages.push(
      [`${base}/inventory?cursor=${enc(value)}`, 'cursor'],
      [`${base}/events?cursor=${enc(value)}`, 'cursor'],
      [`${base}/logs?cursor=${enc(`${value}_${uuid}`)}`, 'cursor'],
    );
  }
  timePages.push(
    [`${base}/logs?day=0000-01-01`, 'day'],
    [`${base}/logs?day=9999-12-31`, 'day'],
    [`${base}/logs?hour=0000-01-01T00:00Z`, 'hour'],
    [`${base}/logs?hour=9999-12-31T23:00Z`, 'hour'],
  );
  for (const [url, name] of timePages) {
    const res = await owner.browser.get(url);
    assertPage400(t, res, url);
    // The page says what is wrong with its link, where its alerts go.
    t.ok(alertOf(res.body), `${url}: the page's alert (${name})`);
  }

  for (const page of ['', '/keys', '/oauth', '/webhooks', '/events', '/logs', '/inventory']) {
    for (const name of ['cursor', 'env', 'status', 'path', 'done', 'x']) {
      const url = `${base}${page}?${name}=a%00b`;
      assertPage400(t, await owner.browser.get(url), url);
    }
  }
  // Anonymous: refused before the sign-in redirect.
  assertPage400(t, await new Browser(app).get(`${base}/logs?cursor=%00`), 'anonymous portal');
});

t.test('sign-in and OAuth: U+0000 in the query or a form field is a 400', async (t) => {
  const anonymous = new Browser(app);
  assertPage400(t, await anonymous.get('/login?return_to=%00'), '/login');
  assertPage400(
    t,
    await anonymous.get(`/oauth/authorize?client_id=${appId}&response_type=code&state=a%00b`),
    '/oauth/authorize',
  );
  // Form fields on the portal's signed-in forms (the app's name reached SQL: a 500 before).
  const named = await owner.browser.act('/portal/apps', '/portal/apps', { name: 'App\u0000' });
  assertPage400(t, named, 'new app named with U+0000');
  const renamed = await owner.browser.act(
    `/portal/apps/${appId}/settings`,
    `/portal/apps/${appId}/settings/name`,
    { name: 'App\u0000' },
  );
  assertPage400(t, renamed, 'app renamed with U+0000');

  // RFC 6749 5.2: the token endpoint's own format, invalid_request.
  for (const [field, value] of [
    ['code', 'a\u0000b'],
    ['refresh_token', 'a\u0000b'],
    ['code_verifier', '\u0000'],
  ]) {
    const form = new URLSearchParams({
      grant_type: field === 'refresh_token' ? 'refresh_token' : 'authorization_code',
      code: 'svc_ac_x',
      redirect_uri: 'https://client.example.com/callback',
      client_id: appId,
      client_secret: clientSecret,
      [field!]: value!,
    });
    const res = await app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: form.toString(),
    });
    t.equal(res.statusCode, 400, `token with U+0000 in ${field}: 400`);
    t.same(
      JSON.parse(res.body),
      { error: 'invalid_request', error_description: `The parameter ${field} is invalid.` },
      `token: invalid_request naming ${field}`,
    );
  }
});
