/**
 * Rate limits (the document's "Rate limits" table, docs/configuration.md): the headers on every
 * kind of response, 429 in each door's own format with Retry-After, the keys (a valid
 * credential; the IP when anonymous or rejected, so guessing keys spends the IP's budget), the
 * stricter token and sign-in limits (a sign-in attempt is a post submitting a password), counters
 * in Redis under a digest (never the secret; for failed sign-ins, never the username), and
 * the fallback to memory while Redis is gone: no 5xx, logged once, back to Redis when it returns.
 * Redis here is a private redis-server child on a free port (test/helpers/private-servers.ts).
 */
import type { InjectOptions } from 'fastify';
import { Redis } from 'ioredis';
import t from 'tap';
import { hashSecret } from '../../src/lib/secrets.ts';
import { credentialKey, policyOf, submitsCredentials } from '../../src/plugins/rate-limit.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { privateServersMissing, startPrivateRedis } from '../helpers/private-servers.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';
import { Browser } from '../helpers/browser.ts';
import { buildLoggedApp, rateHeaders } from './support.ts';

t.test('the policy of each path follows the table', async (t) => {
  t.equal(policyOf('/api/v1/listings'), 'api');
  t.equal(policyOf('/api/v1/nope/deeper'), 'api', 'unknown paths under /api/v1 too');
  t.equal(policyOf('/oauth/userinfo'), 'api');
  t.equal(policyOf('/oauth/token'), 'oauth-token');
  t.equal(policyOf('/oauth/revoke'), 'oauth-token');
  const credentials = { username: 'a', password: 'b' };
  t.equal(submitsCredentials(credentials), true);
  t.equal(submitsCredentials({ ...credentials, email: '' }), true);
  t.equal(
    submitsCredentials({ decision: 'allow', csrf_token: 'x' }),
    false,
    'the consent decision is not a sign-in attempt',
  );
  t.equal(submitsCredentials({ username: 'a' }), false, 'no password: not an attempt');
  t.equal(policyOf('/login', true), 'sign-in', 'an attempt on a sign-in form');
  t.equal(policyOf('/login'), 'web', 'a sign-in form post that is no attempt');
  t.equal(policyOf('/oauth/token', true), 'oauth-token', 'the token endpoint keeps its own');
  t.equal(policyOf('/oauth/authorize'), 'web');
  t.equal(policyOf('/.well-known/oauth-authorization-server'), 'web');
  t.equal(policyOf('/docs'), 'web');
  t.equal(policyOf('/api/v1x'), 'web', 'a prefix is not a path segment');
});

t.test('in memory (no REDIS_URL)', async (t) => {
  const app = await buildTestApp(t, {
    RATE_LIMIT_MAX: '6',
    RATE_LIMIT_TOKEN_MAX: '30',
    RATE_LIMIT_SIGNIN_MAX: '10',
  });
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const otherKey = await createKey(app, developer, 'sandbox');
  /** A key nobody has used yet: its counter starts at zero. */
  const freshKey = async () => bearer(await createKey(app, developer, 'sandbox'));
  let ipSerial = 0;
  const freshIp = () => `198.18.0.${(ipSerial += 1)}`;

  t.test('every kind of response carries RateLimit-Limit, -Remaining and -Reset', async (t) => {
    const cases: { label: string; limit: number; status: number; request: InjectOptions }[] = [
      { label: 'health 200', limit: 6, status: 200, request: { url: '/api/v1/health' } },
      {
        label: 'listings 200 with a key',
        limit: 6,
        status: 200,
        request: { url: '/api/v1/listings', headers: await freshKey() },
      },
      { label: '401 without a credential', limit: 6, status: 401, request: { url: '/api/v1/me' } },
      {
        label: '401 with a rejected credential',
        limit: 6,
        status: 401,
        request: { url: '/api/v1/me', headers: bearer('svc_sandbox_notakeyatall_notakeyatall_xx') },
      },
      {
        label: '401 with a malformed Authorization header',
        limit: 6,
        status: 401,
        request: { url: '/api/v1/me', headers: { authorization: 'Token abc' } },
      },
      {
        label: '404 unknown route',
        limit: 6,
        status: 404,
        request: { url: '/api/v1/nothing-here' },
      },
      { label: '405', limit: 6, status: 405, request: { method: 'PUT', url: '/api/v1/listings' } },
      {
        label: '415',
        limit: 6,
        status: 415,
        request: {
          method: 'POST',
          url: '/api/v1/listings',
          headers: { ...(await freshKey()), 'content-type': 'text/plain' },
          payload: 'x',
        },
      },
      {
        label: '400 malformed JSON',
        limit: 6,
        status: 400,
        request: {
          method: 'POST',
          url: '/api/v1/listings',
          headers: { ...(await freshKey()), 'content-type': 'application/json' },
          payload: '{',
        },
      },
      {
        label: '413',
        limit: 6,
        status: 413,
        request: {
          method: 'POST',
          url: '/api/v1/listings',
          headers: { ...(await freshKey()), 'content-type': 'application/json' },
          payload: JSON.stringify({ title: 'x'.repeat(1_100_000) }),
        },
      },
      {
        label: 'token endpoint 401 (OAuth format)',
        limit: 30,
        status: 401,
        request: {
          method: 'POST',
          url: '/oauth/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'grant_type=authorization_code',
        },
      },
      {
        label: 'authorize page (HTML 400)',
        limit: 6,
        status: 400,
        request: { url: '/oauth/authorize?client_id=nope' },
      },
      {
        label: 'metadata',
        limit: 6,
        status: 200,
        request: { url: '/.well-known/oauth-authorization-server' },
      },
      { label: 'sign-in page', limit: 6, status: 200, request: { url: '/login' } },
      {
        label: 'sign-in post (HTML 403, no CSRF)',
        limit: 10,
        status: 403,
        request: {
          method: 'POST',
          url: '/login',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'username=a&password=b',
        },
      },
      {
        label: 'sign-up post (HTML 403, no CSRF)',
        limit: 10,
        status: 403,
        request: {
          method: 'POST',
          url: '/portal/signup',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'username=abc&password=b',
        },
      },
      {
        label: 'consent decision (not a sign-in attempt)',
        limit: 6,
        status: 400,
        request: {
          method: 'POST',
          url: '/oauth/authorize?client_id=nope',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'decision=allow',
        },
      },
      {
        label: 'sign-in post refused before it is read (413)',
        limit: 6,
        status: 413,
        request: {
          method: 'POST',
          url: '/login',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `username=a&password=${'x'.repeat(70_000)}`,
        },
      },
    ];
    for (const c of cases) {
      const res = await app.inject({ ...c.request, remoteAddress: freshIp() });
      t.equal(res.statusCode, c.status, `${c.label}: status`);
      const h = rateHeaders(res.headers);
      t.equal(h.limit, c.limit, `${c.label}: RateLimit-Limit`);
      t.equal(h.remaining, c.limit - 1, `${c.label}: RateLimit-Remaining`);
      t.ok(
        h.reset !== undefined && h.reset >= 0 && h.reset <= 60,
        `${c.label}: RateLimit-Reset in seconds`,
      );
      t.equal(h.retryAfter, undefined, `${c.label}: no Retry-After below the limit`);
      t.ok(res.headers['x-request-id'], `${c.label}: X-Request-Id`);
    }
  });

  t.test(
    'per credential: the 7th call of a key is 429 rate_limited, other keys and the IP are unaffected',
    async (t) => {
      const ip = freshIp();
      const remaining: number[] = [];
      for (let i = 0; i < 6; i += 1) {
        const res = await app.inject({
          url: '/api/v1/listings',
          headers: bearer(key),
          remoteAddress: i % 2 ? ip : freshIp(),
        });
        t.equal(res.statusCode, 200);
        remaining.push(rateHeaders(res.headers).remaining!);
      }
      t.same(remaining, [5, 4, 3, 2, 1, 0], 'one counter for the key, whatever the IP');
      const limited = await app.inject({
        url: '/api/v1/listings',
        headers: bearer(key),
        remoteAddress: ip,
      });
      t.equal(limited.statusCode, 429);
      const body = limited.json();
      t.equal(body.error.code, 'rate_limited');
      t.match(
        body.error.message,
        /^Too many requests: at most 6 per 1 minute; retry in (1 minute|\d+ seconds?)\.$/,
      );
      t.equal(body.meta.request_id, limited.headers['x-request-id']);
      t.equal(body.meta.environment, 'sandbox', 'the envelope names the credential environment');
      const h = rateHeaders(limited.headers);
      t.equal(h.limit, 6);
      t.equal(h.remaining, 0);
      t.ok(h.retryAfter! >= 1 && h.retryAfter! <= 60, `Retry-After ${h.retryAfter}`);
      t.equal(h.retryAfter, h.reset, 'Retry-After equals RateLimit-Reset');

      const write = await app.inject({
        method: 'POST',
        url: '/api/v1/listings',
        headers: bearer(key),
        payload: { title: 'Blocked', price_cents: 100 },
      });
      t.equal(write.statusCode, 429, 'writes are limited too');

      const other = await app.inject({
        url: '/api/v1/listings',
        headers: bearer(otherKey),
        remoteAddress: ip,
      });
      t.equal(other.statusCode, 200, 'another key of the same owner has its own counter');
      const anonymous = await app.inject({ url: '/api/v1/listings', remoteAddress: ip });
      t.equal(anonymous.statusCode, 200, 'the IP has its own counter');
    },
  );

  t.test('anonymous callers are limited per IP', async (t) => {
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i < 7; i += 1)
      statuses.push((await app.inject({ url: '/api/v1/listings', remoteAddress: ip })).statusCode);
    t.same(statuses, [200, 200, 200, 200, 200, 200, 429]);
    t.equal(
      (await app.inject({ url: '/api/v1/listings', remoteAddress: freshIp() })).statusCode,
      200,
      'another IP is not limited',
    );
    const v6a = await app.inject({ url: '/api/v1/health', remoteAddress: '2001:db8:1:2::1' });
    const v6b = await app.inject({ url: '/api/v1/health', remoteAddress: '2001:db8:1:2::ffff' });
    t.equal(
      rateHeaders(v6b.headers).remaining,
      rateHeaders(v6a.headers).remaining! - 1,
      'IPv6 addresses of one /64 share a counter',
    );
  });

  t.test('rejected credentials spend the IP budget (guessing keys is limited)', async (t) => {
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i < 7; i += 1) {
      const guess = `svc_live_guess${i}_${'x'.repeat(30)}`;
      statuses.push(
        (await app.inject({ url: '/api/v1/me', headers: bearer(guess), remoteAddress: ip }))
          .statusCode,
      );
    }
    t.same(statuses, [401, 401, 401, 401, 401, 401, 429], 'a new guess each time, one counter');
    t.equal(
      (await app.inject({ url: '/api/v1/listings', remoteAddress: ip })).statusCode,
      429,
      'anonymous calls from that IP too',
    );
    t.equal(
      (await app.inject({ url: '/api/v1/me', headers: bearer(otherKey), remoteAddress: ip }))
        .statusCode,
      200,
      'a valid key from that IP still works',
    );
  });

  t.test('the token endpoints: 30 per minute per IP, answered in the OAuth format', async (t) => {
    const ip = freshIp();
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const statuses: number[] = [];
    for (let i = 0; i < 15; i += 1) {
      statuses.push(
        (
          await app.inject({
            method: 'POST',
            url: '/oauth/token',
            headers: form,
            payload: 'grant_type=authorization_code',
            remoteAddress: ip,
          })
        ).statusCode,
      );
      statuses.push(
        (
          await app.inject({
            method: 'POST',
            url: '/oauth/revoke',
            headers: form,
            payload: 'token=x',
            remoteAddress: ip,
          })
        ).statusCode,
      );
    }
    t.notOk(statuses.includes(429), 'token and revoke share 30 requests');
    const res = await app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: form,
      payload: 'grant_type=authorization_code',
      remoteAddress: ip,
    });
    t.equal(res.statusCode, 429);
    t.same(Object.keys(res.json()).sort(), ['error', 'error_description']);
    t.equal(res.json().error, 'rate_limited');
    t.equal(res.headers['cache-control'], 'no-store');
    t.ok(Number(res.headers['retry-after']) >= 1, 'Retry-After');
    t.equal(rateHeaders(res.headers).limit, 30);
    t.equal(
      (await app.inject({ url: '/api/v1/listings', remoteAddress: ip })).statusCode,
      200,
      'the API budget of that IP is separate',
    );
  });

  t.test(
    'sign-in posts: 10 per minute per IP across /login and /oauth/authorize, then a 429 page',
    async (t) => {
      const ip = freshIp();
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      for (let i = 0; i < 10; i += 1) {
        const url = i % 2 ? '/login' : '/oauth/authorize';
        const res = await app.inject({
          method: 'POST',
          url,
          headers: form,
          payload: 'username=someone&password=guess',
          remoteAddress: ip,
        });
        t.not(res.statusCode, 429, `post ${i + 1} to ${url} is not limited`);
      }
      for (const url of ['/login', '/oauth/authorize']) {
        const res = await app.inject({
          method: 'POST',
          url,
          headers: form,
          payload: 'username=someone&password=guess',
          remoteAddress: ip,
        });
        t.equal(res.statusCode, 429, `${url}: 429`);
        t.match(res.headers['content-type'], /^text\/html/, `${url}: an HTML page`);
        t.match(res.body, /Too many requests/);
        t.ok(Number(res.headers['retry-after']) >= 1, `${url}: Retry-After`);
        t.equal(res.headers['x-frame-options'], 'DENY', `${url}: the page headers`);
      }
      t.equal(
        (await app.inject({ url: '/login', remoteAddress: ip })).statusCode,
        200,
        'the sign-in page itself is still shown',
      );
    },
  );
});

const missing = privateServersMissing();
t.test('with Redis (REDIS_URL)', { skip: missing ?? false }, async (t) => {
  const redis = await startPrivateRedis(t);
  const inspect = new Redis(redis.url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 200,
    enableOfflineQueue: false,
  });
  inspect.on('error', () => {});
  t.teardown(() => inspect.disconnect());
  await inspect.connect();
  const { app, logs } = await buildLoggedApp(t, {
    REDIS_URL: redis.url,
    RATE_LIMIT_MAX: '5',
    RATE_LIMIT_WINDOW_MS: '3000',
  });
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const events = (name: string) => logs().filter((l) => l.event === name);

  t.test('counters live in Redis under a digest, never the credential', async (t) => {
    const res = await app.inject({ url: '/api/v1/me', headers: bearer(key) });
    t.equal(res.statusCode, 200);
    const keys = await inspect.keys('*');
    t.ok(
      keys.includes(`listings-api:rl:api:${credentialKey(key)}`),
      `the credential's counter (${keys.join(', ')})`,
    );
    t.equal(await inspect.get(`listings-api:rl:api:${credentialKey(key)}`), '1');
    const secretPart = key.slice('svc_sandbox_'.length);
    t.notOk(
      keys.some((k) => k.includes(secretPart) || k.includes(hashSecret(key))),
      'neither the key nor its stored hash appears in Redis',
    );
    t.same(events('rate_limit_redis_down'), [], 'no fallback while Redis is up');
  });

  t.test('failed sign-ins are counted in Redis too, under a digest of the username', async (t) => {
    const browser = new Browser(app, '198.18.4.1');
    await browser.get('/login');
    t.equal(
      (await browser.submit({ username: 'Typed_Secret_Name', password: 'not the password' }))
        .statusCode,
      401,
    );
    const keys = await inspect.keys('listings-api:rl:sign-in-failures:*');
    t.equal(
      keys.length,
      2,
      `this client's attempts and the username's failures (${keys.join(', ')})`,
    );
    t.notOk(
      keys.some((k) => k.toLowerCase().includes('typed_secret_name')),
      'never the username itself',
    );
  });

  t.test('the window resets', async (t) => {
    const ip = '198.18.1.1';
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1)
      statuses.push((await app.inject({ url: '/api/v1/health', remoteAddress: ip })).statusCode);
    t.same(statuses, [200, 200, 200, 200, 200, 429]);
    const reset = Number(
      (await app.inject({ url: '/api/v1/health', remoteAddress: ip })).headers['ratelimit-reset'],
    );
    t.ok(reset >= 1 && reset <= 3, `reset in ${reset} s`);
    // Time is the subject: the window's end, as RateLimit-Reset announced it.
    await sleep(reset * 1000 + 200);
    t.equal(
      (await app.inject({ url: '/api/v1/health', remoteAddress: ip })).statusCode,
      200,
      'allowed again after the window',
    );
  });

  t.test(
    'Redis stops: memory counters, no 5xx, logged once; Redis returns: shared counters again, logged once',
    async (t) => {
      await redis.stop('SIGKILL');
      const statuses = new Map<number, number>();
      let withHeaders = 0;
      const started = Date.now();
      let n = 0;
      // Bounded: 150 requests or 4 s, spread over keys and IPs.
      while (n < 150 && Date.now() - started < 4000) {
        const res = await app.inject({
          url: '/api/v1/listings',
          headers: n % 3 === 0 ? bearer(key) : {},
          remoteAddress: `198.18.2.${n % 40}`,
        });
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        if (rateHeaders(res.headers).limit === 5) withHeaders += 1;
        n += 1;
      }
      t.comment(
        `during the Redis outage: ${n} responses, by status ${JSON.stringify(Object.fromEntries(statuses))}`,
      );
      const signIn = new Browser(app, '198.18.2.200');
      await signIn.get('/login');
      t.equal(
        (await signIn.submit({ username: 'someone', password: 'not the password' })).statusCode,
        401,
        'failed sign-ins are counted in memory meanwhile',
      );
      t.same(
        [...statuses.keys()].filter((s) => s >= 500),
        [],
        'no 5xx',
      );
      t.equal(withHeaders, n, 'every response still carries the headers');
      t.ok((statuses.get(429) ?? 0) > 0, 'limits still apply (in memory)');
      t.equal(events('rate_limit_redis_down').length, 1, 'the fallback is logged once');
      t.equal(app.redis?.degraded, true);

      await redis.start();
      await waitUntil(
        'the limiter to use Redis again',
        () => events('rate_limit_redis_up').length > 0,
        { timeoutMs: 10_000 },
      );
      // The first call after a failure may still be in the pause; a few calls reach Redis.
      const ip = '198.18.3.1';
      for (let i = 0; i < 3; i += 1) await app.inject({ url: '/api/v1/health', remoteAddress: ip });
      // Time is the subject: past the limiter's pause after a Redis failure (1 s), the next
      // call goes to Redis; waiting on the count instead would spend requests of the window.
      await sleep(1100);
      const res = await app.inject({ url: '/api/v1/health', remoteAddress: ip });
      t.equal(res.statusCode, 200);
      t.ok(
        Number(await inspect.get(`listings-api:rl:api:ip:${ip}`)) >= 1,
        'counted in Redis again',
      );
      t.equal(events('rate_limit_redis_down').length, 1, 'still one fallback line');
      t.equal(events('rate_limit_redis_up').length, 1, 'one line for the way back');
      t.equal(app.redis?.degraded, false);
    },
  );
});

t.test(
  'Redis unreachable at boot: the service starts on memory counters, and uses Redis once it is up',
  { skip: missing ?? false },
  async (t) => {
    const redis = await startPrivateRedis(t);
    await redis.stop('SIGKILL');
    const started = Date.now();
    const { app, logs } = await buildLoggedApp(t, { REDIS_URL: redis.url, RATE_LIMIT_MAX: '3' });
    t.ok(Date.now() - started < 30_000, 'boots without waiting on Redis for long');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i += 1) {
      const res = await app.inject({ url: '/api/v1/health' });
      statuses.push(res.statusCode);
      t.equal(rateHeaders(res.headers).limit, 3);
    }
    t.same(statuses, [200, 200, 200, 429]);
    t.equal(logs().filter((l) => l.event === 'rate_limit_redis_down').length, 1, 'logged once');
    t.notOk(
      logs().some((l) => l.level >= 50),
      'no error-level lines',
    );

    await redis.start();
    await waitUntil(
      'the limiter to reach Redis',
      () => logs().some((l) => l.event === 'rate_limit_redis_up'),
      { timeoutMs: 15_000 },
    );
    t.equal(app.redis?.degraded, false, 'counting in Redis now');
  },
);
