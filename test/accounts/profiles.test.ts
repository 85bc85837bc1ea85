/**
 * GET /api/v1/me and GET /api/v1/profiles/{username} as a client sees them (the OpenAPI Profile
 * schema, "Authentication"): the profile resource, the credential rules and listing_count.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { bearer, createDeveloper, createKey, type Developer } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const PUBLIC_FIELDS = [
  'avatar_url',
  'bio',
  'created_at',
  'display_name',
  'id',
  'listing_count',
  'username',
];
const PRIVATE_FIELDS = [...PUBLIC_FIELDS, 'email'].sort();

const app = await buildTestApp(t);
const ana: Developer = await createDeveloper(app, 'ana_profiles');
const bob: Developer = await createDeveloper(app, 'bob_profiles');
const anaSandbox = await createKey(app, ana, 'sandbox');
const anaLive = await createKey(app, ana, 'live');
const bobSandbox = await createKey(app, bob, 'sandbox');

const me = (headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url: '/api/v1/me', headers });
const profile = (username: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url: `/api/v1/profiles/${username}`, headers });

let photo = 0;
async function createListing(key: string, status: 'draft' | 'active'): Promise<string> {
  photo += 1;
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(key),
    payload: {
      title: `Listing ${photo}`,
      price_cents: 1000 + photo,
      status,
      ...(status === 'active' ? { cover_image_url: `https://img.example.com/${photo}.jpg` } : {}),
    },
  });
  if (res.statusCode !== 201) throw new Error(`create failed: ${res.statusCode} ${res.body}`);
  return res.json().data.id as string;
}

t.test(
  'GET /me with a sandbox key: the owner profile with email, environment sandbox',
  async (t) => {
    const res = await me(bearer(anaSandbox));
    t.equal(res.statusCode, 200);
    t.match(res.headers['content-type'], /^application\/json/);
    const body = res.json();
    t.same(Object.keys(body.data).sort(), PRIVATE_FIELDS);
    t.equal(body.data.id, ana.userId);
    t.equal(body.data.username, 'ana_profiles');
    t.equal(body.data.display_name, 'ana_profiles', 'defaults to the username');
    t.equal(body.data.avatar_url, null);
    t.equal(body.data.bio, null);
    t.equal(body.data.email, 'ana_profiles@example.com');
    t.equal(body.data.listing_count, 0);
    t.match(body.data.created_at, ISO);
    t.ok(
      Math.abs(Date.parse(body.data.created_at) - Date.now()) < 5 * 60_000,
      'created_at is recent',
    );
    t.same(body.meta, {
      version: 'v1',
      environment: 'sandbox',
      request_id: res.headers['x-request-id'],
    });
  },
);

t.test('GET /me with a live key: same profile, environment live', async (t) => {
  const res = await me(bearer(anaLive));
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.same(Object.keys(body.data).sort(), PRIVATE_FIELDS);
  t.equal(body.data.id, ana.userId);
  t.equal(body.meta.environment, 'live');
});

t.test('GET /me: email is null when unknown', async (t) => {
  await app.services.users.create({ username: 'no_email', password: 'a long passphrase' });
  const created = await app.services.apps.create({ ownerUsername: 'no_email', name: 'x' });
  const { key } = await app.services.keys.create({ appId: created.id, env: 'sandbox' });
  const res = await me(bearer(key));
  t.equal(res.statusCode, 200);
  t.equal(res.json().data.email, null);
  t.same(Object.keys(res.json().data).sort(), PRIVATE_FIELDS);
});

t.test('GET /me without a credential: 401 unauthorized with WWW-Authenticate', async (t) => {
  const res = await me();
  t.equal(res.statusCode, 401);
  t.match(res.headers['www-authenticate'], /^Bearer\b/);
  const body = res.json();
  t.equal(body.error.code, 'unauthorized');
  t.type(body.error.message, 'string');
  t.equal(body.meta.environment, 'live');
  t.notOk('data' in body);
});

t.test('GET /me with a malformed Authorization header: 401', async (t) => {
  for (const authorization of [
    'Basic YW5hOnB3',
    'Bearer',
    'Bearer ',
    `Bearer ${anaSandbox} extra`,
    anaSandbox,
    'Token abc',
  ]) {
    const res = await me({ authorization });
    t.equal(res.statusCode, 401, JSON.stringify(authorization));
    t.equal(res.json().error.code, 'unauthorized');
    t.match(res.headers['www-authenticate'], /^Bearer\b/);
  }
});

t.test('GET /me with an unknown or revoked key: 401', async (t) => {
  const unknown = [
    `svc_sandbox_${randomBytes(32).toString('base64url')}`,
    `svc_live_${randomBytes(32).toString('base64url')}`,
    `svc_oauth_${randomBytes(32).toString('base64url')}`,
    'not_a_known_prefix_at_all',
    anaSandbox.replace(/^svc_sandbox_/, 'svc_live_'),
  ];
  for (const key of unknown) {
    const res = await me(bearer(key));
    t.equal(res.statusCode, 401, key.slice(0, 16));
    t.equal(res.json().error.code, 'unauthorized');
  }

  const created = await app.services.keys.create({ appId: ana.appId, env: 'sandbox' });
  t.equal((await me(bearer(created.key))).statusCode, 200, 'works before revocation');
  await app.services.keys.revoke(created.id);
  const res = await me(bearer(created.key));
  t.equal(res.statusCode, 401);
  t.equal(res.json().error.code, 'unauthorized');
  t.equal(res.json().meta.environment, 'sandbox', 'meta echoes the key prefix');
});

t.test('GET /me with a key without scope read: 403 forbidden', async (t) => {
  const writeOnly = await createKey(app, ana, 'sandbox', 'listings:write');
  const res = await me(bearer(writeOnly));
  t.equal(res.statusCode, 403);
  const body = res.json();
  t.equal(body.error.code, 'forbidden');
  t.match(body.error.message, /read/);
  t.equal(body.meta.environment, 'sandbox');
});

t.test('GET /profiles/{username}: the public profile, never the email', async (t) => {
  for (const headers of [{}, bearer(anaSandbox), bearer(anaLive), bearer(bobSandbox)]) {
    const res = await profile('ana_profiles', headers);
    t.equal(res.statusCode, 200);
    const body = res.json();
    t.same(Object.keys(body.data).sort(), PUBLIC_FIELDS);
    t.notOk('email' in body.data, 'no email, even for the owner');
    t.notMatch(res.body, /@example\.com/);
    t.equal(body.data.id, ana.userId);
    t.equal(body.data.username, 'ana_profiles');
    t.match(body.data.created_at, ISO);
  }
  t.equal((await profile('ana_profiles')).json().meta.environment, 'live', 'anonymous: live');
  t.equal((await profile('ana_profiles', bearer(anaSandbox))).json().meta.environment, 'sandbox');
});

t.test('GET /profiles/{username}: 404 not_found for an unknown user', async (t) => {
  // Names that cannot exist (bad format, a NUL byte PostgreSQL would reject) are 404 as well.
  for (const username of [
    'nobody_here',
    'NoSuchUser',
    'x',
    'a'.repeat(90),
    'nul%00byte',
    'ana%27--',
  ]) {
    const res = await profile(username);
    t.equal(res.statusCode, 404, username);
    t.equal(res.json().error.code, 'not_found');
    t.equal(res.json().meta.version, 'v1');
  }
});

t.test('GET /profiles/{username}: a bad credential is 401, not anonymous', async (t) => {
  const res = await profile(
    'ana_profiles',
    bearer(`svc_live_${randomBytes(32).toString('base64url')}`),
  );
  t.equal(res.statusCode, 401);
  t.equal(res.json().error.code, 'unauthorized');
});

t.test('listing_count counts only live active listings', async (t) => {
  // Sandbox listings in every status: never counted.
  await createListing(anaSandbox, 'active');
  await createListing(anaSandbox, 'active');
  await createListing(anaSandbox, 'draft');
  const sandboxArchived = await createListing(anaSandbox, 'active');
  t.equal(
    (
      await app.inject({
        method: 'DELETE',
        url: `/api/v1/listings/${sandboxArchived}`,
        headers: bearer(anaSandbox),
      })
    ).statusCode,
    200,
  );

  // Live: two active count; draft, archived and a draft-again one do not.
  await createListing(anaLive, 'active');
  await createListing(anaLive, 'active');
  await createListing(anaLive, 'draft');
  const archived = await createListing(anaLive, 'active');
  t.equal(
    (
      await app.inject({
        method: 'DELETE',
        url: `/api/v1/listings/${archived}`,
        headers: bearer(anaLive),
      })
    ).statusCode,
    200,
  );
  const demoted = await createListing(anaLive, 'active');
  const patched = await app.inject({
    method: 'PATCH',
    url: `/api/v1/listings/${demoted}`,
    headers: bearer(anaLive),
    payload: { status: 'draft' },
  });
  t.equal(patched.statusCode, 200);

  // Another seller's listings are not ana's.
  await createListing(bobSandbox, 'active');

  t.equal((await profile('ana_profiles')).json().data.listing_count, 2, 'public profile');
  t.equal((await me(bearer(anaLive))).json().data.listing_count, 2, '/me with a live key');
  t.equal(
    (await me(bearer(anaSandbox))).json().data.listing_count,
    2,
    '/me with a sandbox key: still the live count',
  );
  t.equal(
    (await profile('bob_profiles')).json().data.listing_count,
    0,
    'bob has only a sandbox listing',
  );
});
