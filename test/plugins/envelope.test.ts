/**
 * OpenAPI "Envelopes" and "Errors" on every kind of response, through the real endpoints: the
 * success envelope, the error envelope (unknown route, 405, malformed JSON, 413, 415, validation
 * details), x-request-id, and no internals in any error body.
 */
import type { LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';

const app = await buildTestApp(t);
const dev = await createDeveloper(app);
const sandboxKey = await createKey(app, dev, 'sandbox');
const liveKey = await createKey(app, dev, 'live');

/** Every error body seen in this file, checked for leaked internals at the end. */
const errorBodies: string[] = [];

function expectSuccess(
  t: Test,
  res: LightMyRequestResponse,
  environment: 'live' | 'sandbox',
): Record<string, unknown> {
  t.ok(
    res.statusCode >= 200 && res.statusCode < 300,
    `2xx (got ${res.statusCode}: ${res.body.slice(0, 200)})`,
  );
  t.match(res.headers['content-type'], /^application\/json/);
  const body = res.json();
  t.ok('data' in body, 'has data');
  t.notOk('error' in body, 'no error');
  t.equal(body.meta.version, 'v1');
  t.equal(body.meta.environment, environment);
  t.type(body.meta.request_id, 'string');
  t.ok(body.meta.request_id.length > 0);
  t.equal(res.headers['x-request-id'], body.meta.request_id, 'x-request-id equals meta.request_id');
  return body;
}

function expectError(
  t: Test,
  res: LightMyRequestResponse,
  status: number,
  code: string,
  environment: 'live' | 'sandbox' = 'live',
): {
  error: { code: string; message: string; details?: { path: string; message: string }[] };
  meta: Record<string, unknown>;
} {
  errorBodies.push(res.body);
  t.equal(res.statusCode, status, `status ${status} (body: ${res.body.slice(0, 200)})`);
  t.match(res.headers['content-type'], /^application\/json/);
  const body = res.json();
  t.same(Object.keys(body).sort(), ['error', 'meta']);
  t.equal(body.error.code, code);
  t.type(body.error.message, 'string');
  t.ok(body.error.message.length > 0, 'a human message');
  t.same(Object.keys(body.meta).sort(), ['environment', 'request_id', 'version']);
  t.equal(body.meta.version, 'v1');
  t.equal(body.meta.environment, environment);
  t.equal(res.headers['x-request-id'], body.meta.request_id, 'x-request-id equals meta.request_id');
  return body;
}

const json = { 'content-type': 'application/json' };

t.test('success envelope on reads and writes', async (t) => {
  const anonymous = await app.inject({ method: 'GET', url: '/api/v1/listings' });
  const body = expectSuccess(t, anonymous, 'live');
  t.ok(Array.isArray(body.data));

  expectSuccess(t, await app.inject({ method: 'GET', url: '/api/v1/health' }), 'live');
  expectSuccess(
    t,
    await app.inject({ method: 'GET', url: '/api/v1/listings', headers: bearer(sandboxKey) }),
    'sandbox',
  );
  expectSuccess(
    t,
    await app.inject({ method: 'GET', url: '/api/v1/listings', headers: bearer(liveKey) }),
    'live',
  );
  expectSuccess(
    t,
    await app.inject({ method: 'GET', url: '/api/v1/me', headers: bearer(sandboxKey) }),
    'sandbox',
  );

  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(sandboxKey),
    payload: { title: 'Wool scarf', price_cents: 1200 },
  });
  t.equal(created.statusCode, 201);
  const createdBody = expectSuccess(t, created, 'sandbox');
  const id = (createdBody.data as { id: string }).id;
  expectSuccess(
    t,
    await app.inject({ method: 'GET', url: `/api/v1/listings/${id}`, headers: bearer(sandboxKey) }),
    'sandbox',
  );
  expectSuccess(
    t,
    await app.inject({
      method: 'PATCH',
      url: `/api/v1/listings/${id}`,
      headers: bearer(sandboxKey),
      payload: { title: 'Wool scarf, red' },
    }),
    'sandbox',
  );
  expectSuccess(
    t,
    await app.inject({
      method: 'DELETE',
      url: `/api/v1/listings/${id}`,
      headers: bearer(sandboxKey),
    }),
    'sandbox',
  );
});

t.test('request ids are unique per request', async (t) => {
  const ids = new Set<string>();
  for (let i = 0; i < 5; i += 1) {
    const res = await app.inject({ method: 'GET', url: '/api/v1/health' });
    ids.add(res.json().meta.request_id);
  }
  t.equal(ids.size, 5);
});

t.test('every response carries x-request-id, the documents too', async (t) => {
  for (const url of ['/api/v1/openapi.json', '/api/v1/openapi.yaml']) {
    const res = await app.inject({ method: 'GET', url });
    t.equal(res.statusCode, 200);
    t.type(res.headers['x-request-id'], 'string');
    t.ok(String(res.headers['x-request-id']).length > 0);
  }
});

t.test('unknown route: 404 not_found in the envelope', async (t) => {
  for (const url of [
    '/api/v1/nope',
    '/api/v1/listings/x/y',
    '/api/v1/profiles',
    '/api/v1/me/extra?x=1',
  ]) {
    const body = expectError(t, await app.inject({ method: 'GET', url }), 404, 'not_found');
    t.notOk(body.error.details, 'no details');
  }
  expectError(
    t,
    await app.inject({ method: 'GET', url: '/api/v1/nope', headers: bearer(sandboxKey) }),
    404,
    'not_found',
    'sandbox',
  );
  expectError(
    t,
    await app.inject({ method: 'POST', url: '/api/v1/nope', headers: json, payload: '{}' }),
    404,
    'not_found',
  );
});

t.test('wrong method on a known path: 405 method_not_allowed with Allow', async (t) => {
  const cases: [string, string, string[]][] = [
    ['PUT', '/api/v1/listings', ['GET', 'POST']],
    ['DELETE', '/api/v1/me', ['GET']],
    ['POST', '/api/v1/health', ['GET']],
    ['POST', '/api/v1/listings/7f0a3c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b', ['GET', 'PATCH', 'DELETE']],
    // A literal segment wins over {id} for every method: /listings/batch has POST only.
    ['PUT', '/api/v1/listings/batch', ['POST']],
    ['GET', '/api/v1/listings/batch', ['POST']],
    ['PATCH', '/api/v1/listings/batch', ['POST']],
    ['DELETE', '/api/v1/listings/batch', ['POST']],
    ['OPTIONS', '/api/v1/listings/batch', ['POST']],
  ];
  for (const [method, url, expected] of cases) {
    const res = await app.inject({ method: method as 'GET', url });
    expectError(t, res, 405, 'method_not_allowed');
    const allow = String(res.headers.allow ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    for (const m of expected)
      t.ok(allow.includes(m), `${method} ${url}: Allow names ${m} (got ${allow.join(', ')})`);
    t.notOk(allow.includes(method), `${method} is not in Allow`);
    if (url.endsWith('/batch')) t.same(allow, ['POST'], `${method} ${url}: Allow is POST only`);
  }
  const head = await app.inject({ method: 'HEAD', url: '/api/v1/listings/batch' });
  t.equal(head.statusCode, 405, 'HEAD /listings/batch: 405');
  t.equal(head.headers.allow, 'POST', 'HEAD /listings/batch: Allow: POST');
  // A CORS preflight is still answered there (the "CORS" section).
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/api/v1/listings/batch',
    headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
  });
  t.equal(preflight.statusCode, 204, 'a preflight of /listings/batch: 204');
  t.equal(preflight.headers['access-control-allow-origin'], '*', 'with CORS headers');
});

t.test(
  'a method no route has, with or without a body: 405 on a known path, else 404',
  async (t) => {
    for (const payload of [undefined, '{}']) {
      const headers = payload === undefined ? {} : json;
      const known = await app.inject({ method: 'QUERY', url: '/api/v1/health', headers, payload });
      expectError(t, known, 405, 'method_not_allowed');
      t.equal(known.headers.allow, 'GET, HEAD', "Allow: the path's methods");
      const unknown = await app.inject({ method: 'QUERY', url: '/api/v1/nope', headers, payload });
      expectError(t, unknown, 404, 'not_found');
    }
  },
);

t.test('malformed JSON: 400 validation_error', async (t) => {
  for (const payload of ['{bad', '{"title": "x",}', '[1, 2', '']) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      headers: { ...bearer(sandboxKey), ...json },
      payload,
    });
    expectError(t, res, 400, 'validation_error', 'sandbox');
  }
});

t.test('a JSON body over 1 MiB: 413 payload_too_large', async (t) => {
  const big = JSON.stringify({
    title: 'Big',
    price_cents: 100,
    description: 'x'.repeat(1024 * 1024),
  });
  t.ok(Buffer.byteLength(big) > 1024 * 1024);
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(sandboxKey), ...json },
    payload: big,
  });
  expectError(t, res, 413, 'payload_too_large', 'sandbox');

  // Just under the limit the body is read and validated instead.
  const under = JSON.stringify({
    title: 'Big',
    price_cents: 100,
    description: 'x'.repeat(1024 * 1024 - 100),
  });
  t.ok(Buffer.byteLength(under) <= 1024 * 1024);
  const validated = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(sandboxKey), ...json },
    payload: under,
  });
  const body = expectError(t, validated, 400, 'validation_error', 'sandbox');
  t.ok(
    body.error.details?.some((d) => d.path === '/description'),
    'the description is too long',
  );
});

t.test('a text/plain body: 415 unsupported_media_type', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(sandboxKey), 'content-type': 'text/plain' },
    payload: JSON.stringify({ title: 'Wool scarf', price_cents: 1200 }),
  });
  expectError(t, res, 415, 'unsupported_media_type', 'sandbox');
  const xml = await app.inject({
    method: 'PATCH',
    url: '/api/v1/listings/7f0a3c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b',
    headers: { ...bearer(sandboxKey), 'content-type': 'application/xml' },
    payload: '<listing/>',
  });
  expectError(t, xml, 415, 'unsupported_media_type', 'sandbox');
});

t.test('validation errors carry details with JSON Pointer paths', async (t) => {
  const short = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(sandboxKey),
    payload: { title: 'ab', price_cents: 100 },
  });
  const body = expectError(t, short, 400, 'validation_error', 'sandbox');
  t.ok(Array.isArray(body.error.details));
  t.ok(
    body.error.details?.some(
      (d) => d.path === '/title' && typeof d.message === 'string' && d.message.length > 0,
    ),
    '/title',
  );

  const several = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(sandboxKey),
    payload: { price_cents: -1, condition: 'mint', tags: ['ok', 7] },
  });
  const paths =
    expectError(t, several, 400, 'validation_error', 'sandbox').error.details?.map((d) => d.path) ??
    [];
  for (const path of ['/title', '/price_cents', '/condition', '/tags/1'])
    t.ok(paths.includes(path), `details name ${path} (got ${paths.join(', ')})`);

  for (const limit of ['0', '101', 'abc', '1.5']) {
    const res = await app.inject({ method: 'GET', url: `/api/v1/listings?limit=${limit}` });
    const limitBody = expectError(t, res, 400, 'validation_error');
    t.ok(
      limitBody.error.details?.some((d) => d.path === '/query/limit'),
      `limit=${limit}: /query/limit`,
    );
  }
  const cursor = await app.inject({
    method: 'GET',
    url: '/api/v1/listings?cursor=yesterday',
    headers: bearer(liveKey),
  });
  const cursorBody = expectError(t, cursor, 400, 'validation_error', 'live');
  t.ok(
    cursorBody.error.details?.some((d) => d.path === '/query/cursor'),
    '/query/cursor',
  );
});

t.test('auth errors are in the envelope too', async (t) => {
  expectError(
    t,
    await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      payload: { title: 'abc', price_cents: 1 },
    }),
    401,
    'unauthorized',
  );
  const revoked = await app.services.keys.create({ appId: dev.appId, env: 'sandbox' });
  await app.services.keys.revoke(revoked.id);
  expectError(
    t,
    await app.inject({ method: 'GET', url: '/api/v1/listings', headers: bearer(revoked.key) }),
    401,
    'unauthorized',
    'sandbox',
  );
  const readOnly = await createKey(app, dev, 'sandbox', 'read');
  expectError(
    t,
    await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      headers: bearer(readOnly),
      payload: { title: 'abc', price_cents: 1 },
    }),
    403,
    'forbidden',
    'sandbox',
  );
  expectError(
    t,
    await app.inject({
      method: 'GET',
      url: '/api/v1/listings/7f0a3c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b',
    }),
    404,
    'not_found',
  );
});

// Fastify answers malformed percent-encoding in its router, before any hook or the error
// handler; the server's `frameworkErrors` option (src/plugins/envelope.ts) puts it in the
// envelope. Long parameters reach their operation (maxParamLength, src/app.ts), which answers.
t.test('URLs the router refuses are in the envelope too', async (t) => {
  const cases: [string, number, string][] = [
    [`/api/v1/profiles/${'a'.repeat(101)}`, 404, 'not_found'],
    [`/api/v1/listings/${'a'.repeat(120)}`, 400, 'validation_error'],
    ['/api/v1/profiles/%zz', 400, 'validation_error'],
    ['/api/v1/listings/%E0%A4%A', 400, 'validation_error'],
  ];
  for (const [url, status, code] of cases) {
    const res = await app.inject({ method: 'GET', url, headers: bearer(sandboxKey) });
    t.equal(res.statusCode, status, url.slice(0, 40));
    t.match(res.json(), { error: { code }, meta: { version: 'v1', environment: 'sandbox' } });
    t.equal(
      res.headers['x-request-id'],
      res.json().meta?.request_id,
      'x-request-id equals meta.request_id',
    );
  }
});

t.test('inputs that reach the database never surface SQL', async (t) => {
  for (const url of [
    '/api/v1/listings/not-a-uuid',
    "/api/v1/listings/1'%20or%201=1--",
    '/api/v1/listings/00000000-0000-0000-0000-00000000000g',
  ]) {
    const res = await app.inject({ method: 'GET', url, headers: bearer(sandboxKey) });
    errorBodies.push(res.body);
    t.ok([400, 404].includes(res.statusCode), `${url}: 400 or 404 (got ${res.statusCode})`);
    t.ok(res.statusCode < 500);
  }
  for (const username of ["x'%20or%20'1'='1", '%00', 'a%00b', 'a'.repeat(100)]) {
    const res = await app.inject({ method: 'GET', url: `/api/v1/profiles/${username}` });
    errorBodies.push(res.body);
    t.ok(res.statusCode < 500, `profiles/${username.slice(0, 20)}: ${res.statusCode}`);
  }
  const nul = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(sandboxKey),
    payload: { title: 'nul \u0000 byte', price_cents: 100 },
  });
  errorBodies.push(nul.body);
  t.ok(nul.statusCode < 500, `a NUL byte in a string is not a 500 (got ${nul.statusCode})`);
  const huge = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: bearer(sandboxKey),
    payload: { title: 'Huge price', price_cents: 2 ** 40 },
  });
  errorBodies.push(huge.body);
  t.ok(
    huge.statusCode < 500,
    `a price beyond the integer column is not a 500 (got ${huge.statusCode})`,
  );
});

t.test('no error body contains a stack trace or SQL', async (t) => {
  t.ok(errorBodies.length > 20, `checked ${errorBodies.length} error bodies`);
  for (const body of errorBodies) {
    t.notMatch(body, /\bat [^\s]+ \(|\n\s+at /, 'no stack frames');
    t.notMatch(body, /\bselect\s/i, 'no select');
    t.notMatch(body, /\binsert\s/i, 'no insert');
    t.notMatch(body, /\bupdate\s+"?\w+"?\s+set\b/i, 'no update');
    t.notMatch(body, /node_modules/, 'no module paths');
    t.notMatch(body, /\.ts:\d+/, 'no source positions');
  }
});
