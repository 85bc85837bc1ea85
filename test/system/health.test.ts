/**
 * GET /api/v1/health (the getHealth operation) and the served OpenAPI document (docs/api.md).
 */
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { buildApp } from '../../src/app.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp, testConfig } from '../helpers/app.ts';
import { listeningApp } from '../helpers/listening.ts';
import { waitUntil } from '../helpers/wait.ts';

const BASE_URL = 'https://listings.example.test';
const app = await buildTestApp(t, { BASE_URL });

t.test('GET /health: { ok, database: not_checked, session_secret } in the envelope', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/api/v1/health' });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.same(
    body.data,
    {
      ok: true,
      database: 'not_checked',
      session_secret: 'generated',
      db: null,
      config_ready: false,
    },
    'no check asked for, and no SESSION_SECRET: said as such (and in the deprecated fields)',
  );
  t.same(body.meta, {
    version: 'v1',
    environment: 'live',
    request_id: res.headers['x-request-id'],
  });

  t.match(
    (await app.inject({ method: 'GET', url: '/api/v1/health?db=0' })).json().data,
    { database: 'not_checked', db: null },
    'db=0: no check',
  );
});

t.test('GET /health?db=1: database ok', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/api/v1/health?db=1' });
  t.equal(res.statusCode, 200);
  t.same(res.json().data, {
    ok: true,
    database: 'ok',
    session_secret: 'generated',
    db: true,
    config_ready: false,
  });
});

t.test('GET /health with a bad db value: 400 validation_error', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/api/v1/health?db=yes' });
  t.equal(res.statusCode, 400);
  t.equal(res.json().error.code, 'validation_error');
  t.ok(res.json().error.details.some((d: { path: string }) => d.path === '/query/db'));
});

t.test('GET /health with credentials: environment echoed; a bad one is 401', async (t) => {
  const dev = await createDeveloper(app);
  const sandbox = await createKey(app, dev, 'sandbox');
  const res = await app.inject({ method: 'GET', url: '/api/v1/health', headers: bearer(sandbox) });
  t.equal(res.statusCode, 200);
  t.equal(res.json().meta.environment, 'sandbox');
  const bad = await app.inject({
    method: 'GET',
    url: '/api/v1/health',
    headers: bearer('svc_live_not_a_real_key_0123456789abcdef0123'),
  });
  t.equal(bad.statusCode, 401);
  t.equal(bad.json().error.code, 'unauthorized');
});

t.test('GET /openapi.json: the OpenAPI 3.1 document, servers pointing at BASE_URL', async (t) => {
  const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^application\/json/);
  const doc = res.json();
  t.match(doc.openapi, /^3\.1\.\d+$/);
  t.type(doc.info?.title, 'string');
  t.ok(doc.paths['/api/v1/listings'], 'paths include /api/v1/listings');
  for (const path of [
    '/api/v1/health',
    '/api/v1/me',
    '/api/v1/profiles/{username}',
    '/api/v1/listings/{id}',
    '/api/v1/listings/batch',
  ]) {
    t.ok(doc.paths[path], `paths include ${path}`);
  }
  t.equal(doc.servers?.[0]?.url, BASE_URL);
  t.notOk('data' in doc, 'the document itself, not an envelope');
});

t.test('GET /openapi.yaml parses to the same document', async (t) => {
  const [json, yaml] = await Promise.all([
    app.inject({ method: 'GET', url: '/api/v1/openapi.json' }),
    app.inject({ method: 'GET', url: '/api/v1/openapi.yaml' }),
  ]);
  t.equal(yaml.statusCode, 200);
  t.match(yaml.headers['content-type'], /yaml/);
  t.same(parseYaml(yaml.body), json.json());
});

t.test('the /docs reference reads the same document (@fastify/swagger)', async (t) => {
  const [served, reference] = await Promise.all([
    app.inject({ method: 'GET', url: '/api/v1/openapi.json' }),
    app.inject({ method: 'GET', url: '/docs/openapi.json' }),
  ]);
  t.equal(reference.statusCode, 200);
  t.same(reference.json(), served.json());
  t.same(app.swagger(), served.json(), 'app.swagger() is the served document');
});

t.test('with SESSION_SECRET set: configured; with the database down: 503', async (t) => {
  // A second app (its own fresh database), managed here: its database is closed under it.
  const configured = await buildApp(await testConfig(t, { SESSION_SECRET: 's'.repeat(40) }));
  try {
    const ready = await configured.inject({ method: 'GET', url: '/api/v1/health?db=1' });
    t.equal(ready.statusCode, 200);
    t.same(ready.json().data, {
      ok: true,
      database: 'ok',
      session_secret: 'configured',
      db: true,
      config_ready: true,
    });

    await configured.database.close();
    const down = await configured.inject({ method: 'GET', url: '/api/v1/health?db=1' });
    t.equal(down.statusCode, 503);
    const body = down.json();
    t.equal(body.error.code, 'service_unavailable');
    t.equal(body.meta.version, 'v1');
    t.equal(down.headers['x-request-id'], body.meta.request_id);
    t.notMatch(down.body, /\n\s+at |select |node_modules/i);

    const liveness = await configured.inject({ method: 'GET', url: '/api/v1/health' });
    t.equal(liveness.statusCode, 200, 'without ?db=1 the process is still alive');
    t.same(liveness.json().data, {
      ok: true,
      database: 'not_checked',
      session_secret: 'configured',
      db: null,
      config_ready: true,
    });
  } finally {
    await configured.close().catch(() => {}); // its database is already closed
  }
});

t.test('shutting down: 503 from the signal on, while other requests are served', async (t) => {
  // SHUTDOWN_DELAY_MS (src/plugins/graceful-close.ts): a balancer's check on /health fails at
  // once and the process still serves for the delay, each answer with Connection: close.
  const { app: closing, localUrl } = await listeningApp(t, { SHUTDOWN_DELAY_MS: '1500' });
  const before = await fetch(`${localUrl}/api/v1/health?db=1`);
  t.equal(before.status, 200, 'serving: 200');
  t.not(before.headers.get('connection'), 'close');
  const closed = closing.close();
  await waitUntil('the close to begin', () => closing.drain.draining);
  t.notOk(closing.drain.closing, 'the drain itself has not begun');
  for (const url of ['/api/v1/health', '/api/v1/health?db=1']) {
    const res = await fetch(`${localUrl}${url}`);
    t.equal(res.status, 503, `${url}: 503 while shutting down`);
    t.equal(((await res.json()) as { error: { code: string } }).error.code, 'service_unavailable');
    t.equal(res.headers.get('retry-after'), '1');
    t.equal(res.headers.get('connection'), 'close');
  }
  const other = await fetch(`${localUrl}/api/v1/listings?limit=1`);
  t.equal(other.status, 200, 'other requests are still served');
  t.equal(other.headers.get('connection'), 'close', 'each with Connection: close');
  await closed;
  t.ok(closing.drain.closing, 'then the drain ran and the app closed');
  await t.rejects(fetch(`${localUrl}/api/v1/health`), 'the listener is closed');
});
