/**
 * Logs are JSON lines (pino) carrying the request id, and no secret reaches them: not the
 * Authorization header (API keys, access tokens, HTTP Basic client secrets), not a password,
 * client secret or authorization code in a form or a query, not the values of a failed
 * database statement (a webhook secret is stored as issued), not a constraint violation's values.
 * What operators need stays: a webhook attempt's HTTP status, error codes.
 */
import { DrizzleQueryError } from 'drizzle-orm/errors';
import t from 'tap';
import { serializeError } from '../../src/lib/logging.ts';
import { REDACTED, redactUrl } from '../../src/lib/redact.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { buildLoggedApp } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

// Private networks allowed: the webhook receiver is on 127.0.0.1.
const { app, logs, text } = await buildLoggedApp(
  t,
  { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
  'debug',
);
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const clientSecret = (await app.services.apps.rotateClientSecret(developer.appId)).client_secret;

t.test('one JSON line per event, each request line with its request id', async (t) => {
  const res = await app.inject({ url: '/api/v1/me', headers: bearer(key) });
  t.equal(res.statusCode, 200);
  const id = res.headers['x-request-id'];
  const lines = logs().filter((l) => l.reqId === id);
  t.ok(lines.length >= 2, 'incoming request and request completed');
  t.ok(
    lines.every(
      (l) => typeof l.time === 'number' && typeof l.level === 'number' && typeof l.msg === 'string',
    ),
    'pino JSON',
  );
  const completed = lines.find((l) => l.res?.statusCode === 200);
  t.ok(completed && typeof completed.responseTime === 'number', 'status and response time logged');
});

t.test('secrets sent by clients never appear in the logs', async (t) => {
  const code = 'svc_ac_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
  const password = 'my very secret password';
  await app.inject({
    url: `/api/v1/listings?access_token=${key}&code=${code}`,
    headers: bearer(key),
  });
  await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${developer.appId}:${clientSecret}`).toString('base64')}`,
    },
    payload: `grant_type=authorization_code&code=${code}&redirect_uri=https://x.example/cb&client_secret=${clientSecret}`,
  });
  await app.inject({
    method: 'POST',
    url: '/login',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      cookie: 'svc_session=sessiontokenvalue',
    },
    payload: `username=${developer.username}&password=${encodeURIComponent(password)}`,
  });
  // A log call that carries secret-named fields, as a careless caller might write it.
  app.log.info(
    {
      password,
      client_secret: clientSecret,
      body: { code },
      headers: { authorization: `Bearer ${key}` },
    },
    'careless line',
  );

  const all = text();
  for (const [name, secret] of [
    ['API key', key],
    ['API key body', key.slice('svc_sandbox_'.length)],
    ['client secret', clientSecret],
    ['authorization code', code],
    ['password', password],
    ['session cookie', 'sessiontokenvalue'],
  ] as const) {
    t.notOk(all.includes(secret), `no ${name} in the logs`);
  }
  const careless = logs().find((l) => l.msg === 'careless line');
  t.same(
    {
      password: careless?.password,
      client_secret: careless?.client_secret,
      code: careless?.body?.code,
      authorization: careless?.headers?.authorization,
    },
    { password: REDACTED, client_secret: REDACTED, code: REDACTED, authorization: REDACTED },
    'secret-named fields are redacted',
  );
  const listed = logs().find(
    (l) => typeof l.req?.url === 'string' && l.req.url.startsWith('/api/v1/listings?'),
  );
  t.equal(
    listed?.req.url,
    `/api/v1/listings?access_token=${REDACTED}&code=${REDACTED}`,
    'secret query parameters are cut from the URL',
  );
});

t.test('database errors lose their values', async (t) => {
  const webhookSecret = 'svc_whsec_QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ';
  const cause = Object.assign(
    new Error('duplicate key value violates unique constraint "webhook_endpoints_pkey"'),
    {
      code: '23505',
      detail: `Key (secret)=(${webhookSecret}) already exists.`,
      parameters: [webhookSecret, 'https://hooks.example.com'],
      query: 'insert into webhook_endpoints (secret, url) values ($1, $2)',
    },
  );
  const err = new DrizzleQueryError(
    'insert into "webhook_endpoints" ("secret", "url") values ($1, $2)',
    [webhookSecret, 'https://hooks.example.com'],
    cause,
  );
  app.log.error({ err }, 'request failed');
  const line = logs().find(
    (l) => l.msg === 'request failed' && l.err?.type === 'DrizzleQueryError',
  );
  t.ok(line, 'the error is logged');
  t.notOk(JSON.stringify(line).includes(webhookSecret.slice(10)), 'no secret anywhere in the line');
  t.match(
    line?.err.message,
    /^Failed query: insert into "webhook_endpoints"/,
    'the statement is kept',
  );
  t.match(line?.err.message, `params: ${REDACTED}`);
  t.equal(line?.err.cause.code, '23505', 'error codes are kept');
  t.equal(line?.err.cause.detail, `Key (secret)=(${REDACTED}) already exists.`);
  t.notOk('parameters' in (line?.err.cause ?? {}), 'postgres.js parameters are dropped');

  t.same(serializeError('plain svc_live_abcdefghijklmnop'), `plain svc_live_${REDACTED}`);
  // Endpoint secrets are `svc_whsec_` + base64 (`+`, `/`, `=`), older ones base64url (`-`, `_`);
  // their Standard Webhooks form (and listen's secret) is `whsec_` + base64: each is cut whole.
  const current = 'svc_whsec_ab+cd/ef+GH/ij+KL/mn+OP/qr+ST/uv+WX/yz+01/23+45/6=';
  t.same(serializeError(`shown ${current} here`), `shown svc_whsec_${REDACTED} here`);
  const standard = current.replace(/^svc_/, '');
  t.same(serializeError(`shown ${standard} here`), `shown whsec_${REDACTED} here`);
  t.same(serializeError(`old ${webhookSecret}.`), `old svc_whsec_${REDACTED}.`);
  const base64url = 'svc_whsec_ab-cd_ef-GH_ij-KL_mn-OP_qr-ST_uv-WX_yz-01_23-45_67';
  t.same(serializeError(`old ${base64url}.`), `old svc_whsec_${REDACTED}.`);
  // In a URL too, whole: `+` is not read as a space, `/` not as a segment break, for these.
  for (const [url, cut] of [
    [`/x?q=${current}`, `/x?q=svc_whsec_${REDACTED}`],
    [`/x?q=${encodeURIComponent(current)}`, `/x?q=svc_whsec_${REDACTED}`],
    [`/x/${encodeURIComponent(standard)}/y`, `/x/whsec_${REDACTED}/y`],
    [`/x/${current}/y`, `/x/svc_whsec_${REDACTED}/y`],
  ] as const) {
    t.equal(redactUrl(url), cut, url);
  }
  t.equal(
    redactUrl('/oauth/authorize?client_id=a&state=s&code_verifier=v'),
    `/oauth/authorize?client_id=a&state=s&code_verifier=${REDACTED}`,
  );
});

t.test(
  'a webhook attempt logs its HTTP status; a credential under any name or in a message is still cut',
  async (t) => {
    const receiver = await startReceiver(t);
    receiver.reply = () => ({ status: 503 });
    const endpoint = await createEndpoint(app, receiver, { appId: developer.appId, path: '/down' });
    const { delivery_id } = await app.services.endpoints.ping(endpoint.id);
    const attempt = await waitUntil('the attempt line', () =>
      logs().find((l) => l.msg === 'webhook attempt' && l.delivery === delivery_id),
    );
    t.match(attempt, { result: 'failure', code: 503 }, 'the status the receiver answered');

    const code = 'svc_ac_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB';
    app.log.info(
      { code, grant: { code }, errno: { code: 'ECONNREFUSED' } },
      `exchanging ${code} for ${key}`,
    );
    const line = logs().find((l) => l.msg?.startsWith('exchanging '));
    t.same(
      { code: line?.code, nested: line?.grant?.code, errno: line?.errno?.code, msg: line?.msg },
      {
        code: `svc_ac_${REDACTED}`,
        nested: `svc_ac_${REDACTED}`,
        errno: 'ECONNREFUSED',
        msg: `exchanging svc_ac_${REDACTED} for svc_sandbox_${REDACTED}`,
      },
    );
    t.notOk(text().includes(code.slice(7)), 'the code is nowhere in the logs');
  },
);

t.test('a 503 is logged as what it is, without a stack; a 500 with its stack', async (t) => {
  // One waiting place in the process: a second long poll is refused with 503 (overload).
  const busy = await buildLoggedApp(t, {
    EVENTS_WAIT_MAX: '1',
    EVENTS_WAIT_MAX_PER_CREDENTIAL: '1',
    EVENTS_WAIT_MAX_PER_APP: '2',
    EVENTS_WAIT_MAX_PER_USER: '1',
  });
  const dev = await createDeveloper(busy.app);
  const sandbox = await createKey(busy.app, dev, 'sandbox');
  const other = await createKey(busy.app, await createDeveloper(busy.app), 'sandbox');
  const waiting = busy.app.inject({ url: '/api/v1/events?wait=3', headers: bearer(sandbox) });
  await waitUntil('one waiting', () => busy.app.services.events.waiters.size === 1);
  const refused = await busy.app.inject({ url: '/api/v1/events?wait=3', headers: bearer(other) });
  t.equal(refused.statusCode, 503, 'the process has no place left');
  const line = busy.logs().find((l) => l.reqId === refused.headers['x-request-id'] && l.err);
  t.equal(line?.msg, 'backing service unavailable');
  t.equal(line?.err.type, 'ServiceUnavailableError', 'the line says what happened');
  t.match(line?.err.message, /as many waiting requests as it can/);
  t.notOk('stack' in (line?.err ?? {}), 'and carries no stack');
  await waiting;
  // A failure of ours keeps its stack: the one line that must say where.
  const logged = serializeError(new Error('a bug')) as { stack?: string };
  t.match(logged.stack, /logging\.test\.ts/, 'a 500 error is serialized with its stack');
});
