/**
 * What a browser and a proxy see besides the payload: CORS on /api/v1 and the metadata only
 * (the document's "CORS" section; none on /oauth/*), preflights answered
 * without spending the rate limit, security headers (@fastify/helmet) on HTML pages without
 * overriding the pages' own, and request body limits.
 */
import t from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { rateHeaders } from './support.ts';

// https BASE_URL: HSTS is sent (and only then).
const app = await buildTestApp(t, { BASE_URL: 'https://market.example.com', RATE_LIMIT_MAX: '50' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const origin = 'https://integrator.example.net';

t.test(
  'CORS preflight on /api/v1: 204, any origin, the documented methods and headers, not rate limited',
  async (t) => {
    for (const [url, method] of [
      ['/api/v1/listings', 'POST'],
      ['/api/v1/listings/5c1f1f7e-0000-4000-8000-000000000000', 'PATCH'],
      ['/api/v1/listings/5c1f1f7e-0000-4000-8000-000000000000', 'DELETE'],
      ['/api/v1/me', 'GET'],
    ] as const) {
      const res = await app.inject({
        method: 'OPTIONS',
        url,
        headers: {
          origin,
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization, content-type, idempotency-key',
        },
        remoteAddress: '198.18.10.1',
      });
      t.equal(res.statusCode, 204, `${method} ${url}: 204`);
      t.equal(res.headers['access-control-allow-origin'], '*');
      t.equal(res.headers['access-control-allow-methods'], 'GET, POST, PATCH, DELETE');
      t.equal(
        res.headers['access-control-allow-headers'],
        'Authorization, Content-Type, Idempotency-Key, If-None-Match',
      );
      t.equal(res.headers['access-control-max-age'], '600');
      t.notOk(
        res.headers['access-control-allow-credentials'],
        'no credentials (cookies) cross-origin',
      );
      t.ok(res.headers['x-request-id'], 'X-Request-Id');
      t.equal(res.body, '');
    }
    const after = await app.inject({ url: '/api/v1/health', remoteAddress: '198.18.10.1' });
    t.equal(rateHeaders(after.headers).remaining, 49, 'the four preflights did not count');
  },
);

t.test(
  'CORS on actual /api/v1 responses, errors included, exposing the documented headers',
  async (t) => {
    const exposed =
      'X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, ETag';
    for (const [label, res] of [
      ['200', await app.inject({ url: '/api/v1/listings', headers: { origin, ...bearer(key) } })],
      [
        '201',
        await app.inject({
          method: 'POST',
          url: '/api/v1/listings',
          headers: { origin, ...bearer(key) },
          payload: { title: 'Cross-origin', price_cents: 500 },
        }),
      ],
      ['401', await app.inject({ url: '/api/v1/me', headers: { origin } })],
      ['404', await app.inject({ url: '/api/v1/nope', headers: { origin } })],
      [
        'metadata',
        await app.inject({ url: '/.well-known/oauth-authorization-server', headers: { origin } }),
      ],
    ] as const) {
      t.equal(
        res.headers['access-control-allow-origin'],
        '*',
        `${label}: Access-Control-Allow-Origin`,
      );
      t.equal(
        res.headers['access-control-expose-headers'],
        exposed,
        `${label}: Access-Control-Expose-Headers`,
      );
    }
  },
);

t.test('no CORS on /oauth/* nor on the pages', async (t) => {
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/oauth/token',
    headers: { origin, 'access-control-request-method': 'POST' },
  });
  t.notOk(preflight.headers['access-control-allow-origin'], 'token endpoint preflight: no CORS');
  t.not(preflight.statusCode, 204);
  const token = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'grant_type=authorization_code',
  });
  t.notOk(token.headers['access-control-allow-origin'], 'token endpoint: no CORS');
  for (const url of ['/oauth/userinfo', '/oauth/authorize?client_id=x', '/login', '/docs/']) {
    const res = await app.inject({ url, headers: { origin } });
    t.notOk(res.headers['access-control-allow-origin'], `${url}: no CORS`);
  }
});

t.test('an OPTIONS request that is not a preflight is still 405 in the envelope', async (t) => {
  const res = await app.inject({ method: 'OPTIONS', url: '/api/v1/listings' });
  t.equal(res.statusCode, 405);
  t.equal(res.json().error.code, 'method_not_allowed');
  t.match(res.headers.allow, /GET/);
});

t.test(
  'HTML pages carry the security headers; their own stricter headers win; JSON does not',
  async (t) => {
    const page = await app.inject({ url: '/login' });
    t.equal(page.statusCode, 200);
    t.match(page.headers['content-type'], /^text\/html/);
    t.equal(
      page.headers['strict-transport-security'],
      'max-age=31536000; includeSubDomains',
      'HSTS (BASE_URL is https)',
    );
    t.equal(page.headers['x-content-type-options'], 'nosniff');
    t.equal(page.headers['cross-origin-opener-policy'], 'same-origin');
    t.equal(page.headers['cross-origin-resource-policy'], 'same-origin');
    t.equal(page.headers['origin-agent-cluster'], '?1');
    t.equal(page.headers['x-dns-prefetch-control'], 'off');
    t.equal(page.headers['x-permitted-cross-domain-policies'], 'none');
    t.equal(page.headers['referrer-policy'], 'same-origin');
    t.equal(page.headers['x-frame-options'], 'DENY');
    t.match(
      page.headers['content-security-policy'],
      /frame-ancestors 'none'/,
      "the page's own CSP is kept",
    );
    t.equal(page.headers['cache-control'], 'no-store', "the page's own Cache-Control is kept");
    t.notOk(page.headers['x-powered-by']);

    const docs = await app.inject({ url: '/docs/' });
    t.match(docs.headers['content-type'], /^text\/html/);
    t.equal(docs.headers['x-content-type-options'], 'nosniff', '/docs too');
    t.equal(docs.headers['x-frame-options'], 'DENY');

    const limited = await app.inject({ url: '/oauth/authorize?client_id=nope' });
    t.equal(limited.headers['x-content-type-options'], 'nosniff', 'error pages too');

    const json = await app.inject({ url: '/api/v1/health' });
    t.notOk(json.headers['cross-origin-opener-policy'], 'not on JSON');
    t.notOk(json.headers['strict-transport-security'], 'not on JSON');
  },
);

t.test('request body limits', async (t) => {
  const big = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: JSON.stringify({ title: 'x'.repeat(1024 * 1024) }),
  });
  t.equal(big.statusCode, 413, 'over 1 MiB on /api/v1: 413');
  t.equal(big.json().error.code, 'payload_too_large');
  const form = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: `grant_type=authorization_code&code=${'x'.repeat(70 * 1024)}`,
  });
  t.equal(form.statusCode, 400, 'over 64 KiB of form on /oauth/token: refused');
  t.equal(form.json().error, 'invalid_request');
});
