/**
 * Authentication once per request (src/plugins/auth.ts): one hook resolves the credential, and
 * the rate limiter, the envelope and the operation's authorization read its answer. Counted here
 * by the key resolver's calls per request: one for any request that carries a key to the API
 * (valid, rejected, an unknown path, over the rate limit), none where no credential is taken;
 * and a lookup the database cannot answer is a 503 counted under the credential, not the IP.
 */
import t from 'tap';
import type { Caller } from '../../src/access.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';

const app = await buildTestApp(t, { RATE_LIMIT_MAX: '3' });
const dev = await createDeveloper(app);
const sandboxKey = await createKey(app, dev, 'sandbox');
const liveKey = await createKey(app, dev, 'live');

const keys = app.services.keys;
const resolve = keys.resolve.bind(keys);
let lookups = 0;
/** While set, a lookup fails as an unreachable database does. */
let databaseDown = false;
keys.resolve = async (credential: string): Promise<Caller | null> => {
  lookups += 1;
  if (databaseDown)
    throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  return resolve(credential);
};

let ipSerial = 0;
/** Sends a request from a new IP (its own rate-limit counter) and counts the key lookups. */
async function lookupsOf(
  request: { method?: 'GET' | 'POST'; url: string; headers?: Record<string, string> },
  status: number,
) {
  lookups = 0;
  const res = await app.inject({ method: 'GET', ...request, remoteAddress: freshIp() });
  t.equal(res.statusCode, status, `${request.method ?? 'GET'} ${request.url}: ${status}`);
  return { lookups, res };
}
const freshIp = () => `198.18.1.${(ipSerial += 1)}`;

t.test('a valid key is looked up once, whatever reads it', async (t) => {
  const me = await lookupsOf({ url: '/api/v1/me', headers: bearer(sandboxKey) }, 200);
  t.equal(me.lookups, 1, 'GET /me: one lookup for the limiter, the route and the envelope');
  t.equal(me.res.json().meta.environment, 'sandbox');
  t.ok(me.res.headers['ratelimit-remaining'], 'counted');

  const feed = await lookupsOf({ url: '/api/v1/listings', headers: bearer(liveKey) }, 200);
  t.equal(feed.lookups, 1, 'an operation anonymous callers may call too');
  t.equal(feed.res.json().meta.environment, 'live');

  const unknown = await lookupsOf({ url: '/api/v1/nope', headers: bearer(sandboxKey) }, 404);
  t.equal(unknown.lookups, 1, 'an unknown path under the API');
  t.equal(unknown.res.json().meta.environment, 'sandbox');
});

t.test(
  'a rejected key is looked up once and answered 401 in the environment it claims',
  async (t) => {
    const bad = `${sandboxKey.slice(0, -4)}0000`;
    const me = await lookupsOf({ url: '/api/v1/me', headers: bearer(bad) }, 401);
    t.equal(me.lookups, 1);
    t.match(me.res.headers['www-authenticate'], /error="invalid_token"/);
    t.equal(me.res.json().meta.environment, 'sandbox');

    const feed = await lookupsOf({ url: '/api/v1/listings', headers: bearer(bad) }, 401);
    t.equal(feed.lookups, 1, 'a bad key on an operation anonymous callers may call: 401');

    const malformed = await lookupsOf(
      { url: '/api/v1/listings', headers: { authorization: 'Bearer' } },
      401,
    );
    t.equal(malformed.lookups, 0, 'a malformed header is refused without a lookup');
  },
);

t.test('over the limit, the refused request was looked up once too', async (t) => {
  const key = await createKey(app, dev, 'sandbox');
  for (let i = 0; i < 3; i += 1)
    t.equal((await lookupsOf({ url: '/api/v1/me', headers: bearer(key) }, 200)).lookups, 1);
  const over = await lookupsOf({ url: '/api/v1/me', headers: bearer(key) }, 429);
  t.equal(over.lookups, 1, 'the credential keyed the counter; nothing looked it up again');
});

t.test('a lookup the database cannot answer: 503, counted under the credential', async (t) => {
  const key = await createKey(app, dev, 'sandbox');
  databaseDown = true;
  const down = await lookupsOf({ url: '/api/v1/me', headers: bearer(key) }, 503).finally(() => {
    databaseDown = false;
  });
  t.equal(down.lookups, 1);
  t.equal(down.res.headers['ratelimit-remaining'], '2');
  t.equal(down.res.json().meta.environment, 'sandbox');
  const up = await lookupsOf({ url: '/api/v1/me', headers: bearer(key) }, 200);
  t.equal(up.res.headers['ratelimit-remaining'], '1', "the key's counter, from another IP");
  databaseDown = true;
  const unknown = await lookupsOf({ url: '/api/v1/nope', headers: bearer(key) }, 404).finally(
    () => {
      databaseDown = false;
    },
  );
  t.equal(unknown.res.headers['ratelimit-remaining'], '0', 'an unknown path: 404, still counted');
});

t.test('where no Bearer credential is taken, none is looked up', async (t) => {
  const metadata = await lookupsOf(
    { url: '/.well-known/oauth-authorization-server', headers: bearer(sandboxKey) },
    200,
  );
  t.equal(metadata.lookups, 0, 'an operation whose security takes no Bearer credential');
  const page = await lookupsOf({ url: '/docs', headers: bearer(sandboxKey) }, 301);
  t.equal(page.lookups, 0, 'a page');
});
