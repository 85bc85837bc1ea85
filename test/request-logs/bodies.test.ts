/**
 * Bodies in the request log (issue #59 item 6; docs/portal.md, "Request logs"): each logged
 * request keeps its request's and its response's JSON bodies, their first 8 KB, redacted by the
 * one redactor (src/lib/redact.ts): a webhook endpoint's signing secret in the answer that shows
 * it, passwords and tokens under any secret-looking name, credentials in any string. Shown on the
 * portal's request page and by `admin app logs --id`, a cut body marked as cut with its whole
 * size; the list pages carry no bodies.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import { COMMANDS } from '../../src/cli/admin.ts';
import { isSecretMember, redactJson, REDACTED } from '../../src/lib/redact.ts';
import { BODY_CAP_BYTES, loggedBody } from '../../src/request-logs/logged-body.ts';
import { unescapeHtml } from '../helpers/browser.ts';
import { createKeyInPortal, createApp, signUp } from '../portal/support.ts';
import { startReceiver, webhooksApp } from '../webhooks/support.ts';

const app = await webhooksApp(t);
const receiver = await startReceiver(t);
const owner = await signUp(app);
const appId = await createApp(owner, 'Bodies app');
const key = await createKeyInPortal(owner, appId, {
  scopes: ['read', 'listings:write', 'webhooks:write'],
});
const keySecret = key.slice('svc_sandbox_'.length);

const logged = async (requestId: string) => {
  await app.requestLog!.flush();
  const page = await app.services.requestLogs.list(appId, { env: 'sandbox', limit: 100 });
  const row = page.items.find((r) => r.request_id === requestId);
  if (!row) throw new Error(`request ${requestId} is not in the log`);
  return row;
};

const call = (method: 'POST' | 'GET', url: string, payload?: string) =>
  app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${key}`,
      ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(payload === undefined ? {} : { payload }),
  });

t.test("a webhook endpoint's secret: answered to the client, redacted in the log", async (t) => {
  const url = receiver.url('/bodies');
  const res = await call(
    'POST',
    '/api/v1/webhook_endpoints',
    JSON.stringify({ url, enabled_events: ['listing.created'] }),
  );
  t.equal(res.statusCode, 201);
  const secret = JSON.parse(res.body).data.secret as string;
  t.match(secret, /^svc_whsec_/);
  const row = await logged(String(res.headers['x-request-id']));
  t.notOk('request_body' in row, 'a page of the log carries no bodies');

  const one = await app.services.requestLogs.get(appId, row.id);
  t.same(JSON.parse(one.request_body!.text), { url, enabled_events: ['listing.created'] });
  t.same(one.request_body!.cut, false);
  const answered = JSON.parse(one.response_body!.text);
  t.equal(answered.data.secret, REDACTED, 'the signing secret is not kept');
  t.equal(answered.data.url, url, 'the rest of the answer is');
  t.equal(answered.meta.request_id, res.headers['x-request-id']);
  t.equal(one.response_body!.size, Buffer.byteLength(res.body), 'the size is the answer sent');

  const page = await owner.browser.get(`/portal/apps/${appId}/logs/${row.id}`);
  t.equal(page.statusCode, 200);
  const text = unescapeHtml(page.body);
  t.match(text, 'Request body');
  t.match(text, 'Response body');
  t.match(text, `"url": "${url}"`, 'the bodies are shown indented');
  t.match(text, `"secret": "${REDACTED}"`);
  t.notOk(text.includes(secret.slice('svc_whsec_'.length)), 'the page shows no secret');

  // The command as the CLI runs it, on this app's services (an in-memory database has no URL).
  const printed = JSON.parse(
    JSON.stringify(
      await COMMANDS['app logs']!.run(
        app.services,
        new Map([
          ['app', [appId]],
          ['id', [row.id]],
        ]),
      ),
    ),
  );
  t.same(printed, JSON.parse(JSON.stringify(one)), 'admin app logs --id prints the same');
  t.notOk(JSON.stringify(printed).includes(secret.slice('svc_whsec_'.length)));
});

t.test('secrets in a request body, in any member or string, are not kept', async (t) => {
  const plain = 'hunter2-plain-password';
  // Raw text: a credential written with JSON's \u escapes, a secret member's name escaped too.
  const payload =
    `{"title":"Lamp","price_cents":1200,"description":"paste: ${key}",` +
    `"attributes":{"pass\\u0077ord":"${plain}","svc\\u005fsandbox\\u005f${keySecret}":1},` +
    `"access_token":{"nested":"${plain}"},"client_secret":12345}`;
  const res = await call('POST', '/api/v1/listings', payload);
  t.ok(res.statusCode < 500, `answered ${res.statusCode}`);
  const row = await logged(String(res.headers['x-request-id']));
  const one = await app.services.requestLogs.get(appId, row.id);
  const kept = one.request_body!.text;
  t.notOk(kept.includes(keySecret), 'not the key');
  t.notOk(kept.includes(plain), 'not the password, nor a secret member nested');
  t.notOk(kept.includes('12345'), 'a secret member that is a number');
  t.same(JSON.parse(kept), {
    title: 'Lamp',
    price_cents: 1200,
    description: `paste: svc_sandbox_${REDACTED}`,
    attributes: { 'pass\u0077ord': REDACTED, [`svc_sandbox_${REDACTED}`]: 1 },
    access_token: REDACTED,
    client_secret: REDACTED,
  });
  // The answer quotes the unknown fields: the same redaction there.
  t.notOk(one.response_body!.text.includes(keySecret));
});

t.test('a body over 8 KB is cut, marked, and still redacted', async (t) => {
  const items = Array.from({ length: 60 }, (_, i) => ({
    title: `Batch listing ${i} ${'é'.repeat(40)}`,
    price_cents: 1000 + i,
    description: `see ${key}`,
  }));
  const payload = JSON.stringify({ items });
  const res = await call('POST', '/api/v1/listings/batch', payload);
  t.ok(res.statusCode < 500, `answered ${res.statusCode}`);
  const row = await logged(String(res.headers['x-request-id']));
  const one = await app.services.requestLogs.get(appId, row.id);
  t.equal(one.request_body!.size, Buffer.byteLength(payload));
  t.equal(one.request_body!.cut, true);
  t.ok(Buffer.byteLength(one.request_body!.text) <= BODY_CAP_BYTES, 'at most 8 KB kept');
  t.ok(payload.startsWith(one.request_body!.text.slice(0, 20)), 'the start as sent');
  t.notOk(one.request_body!.text.includes(keySecret), 'redacted to the cut');
  t.notOk(one.request_body!.text.includes('\ufffd'), 'no half character at the cut');
  const page = unescapeHtml((await owner.browser.get(`/portal/apps/${appId}/logs/${row.id}`)).body);
  t.match(page, `Cut: the first 8 KB of ${(one.request_body!.size / 1024).toFixed(1)} KB`);
});

t.test('a request without a body, and an answer with one', async (t) => {
  const res = await call('GET', '/api/v1/listings?limit=1');
  const row = await logged(String(res.headers['x-request-id']));
  const one = await app.services.requestLogs.get(appId, row.id);
  t.equal(one.request_body, null);
  t.same(JSON.parse(one.response_body!.text).meta.request_id, res.headers['x-request-id']);
  const page = unescapeHtml((await owner.browser.get(`/portal/apps/${appId}/logs/${row.id}`)).body);
  t.match(page, 'None (no body, or not JSON).');
});

t.test("the document's member names: secret ones are redacted, the rest kept", async (t) => {
  const document = parse(readFileSync('openapi/openapi.yaml', 'utf8')) as unknown;
  const names = new Set<string>();
  (function walk(node: unknown) {
    if (!node || typeof node !== 'object') return;
    const properties = (node as { properties?: object }).properties;
    if (properties && typeof properties === 'object')
      for (const name of Object.keys(properties)) names.add(name);
    for (const value of Object.values(node)) walk(value);
  })(document);
  const secret = [...names].filter(isSecretMember).sort();
  t.same(
    secret,
    [
      'access_token',
      'authorization_endpoint',
      'client_secret',
      // OAuth's metadata, never in a logged body (/api/v1 only): redacted all the same.
      'code_challenge_methods_supported',
      'code_verifier',
      'refresh_token',
      'revocation_endpoint_auth_methods_supported',
      'secret',
      // GET /api/v1/health's configured | generated: no secret, redacted all the same.
      'session_secret',
      'token',
      'token_endpoint',
      'token_endpoint_auth_methods_supported',
    ],
    'every secret-looking member of the document; a new one must be judged here',
  );
  for (const name of ['code', 'idempotency_key', 'previous_secret_expires_at', 'key_id'])
    t.notOk(isSecretMember(name), `${name} is kept`);
});

t.test('redactJson, form by form', async (t) => {
  const k = `svc_live_${'A'.repeat(43)}`;
  const table: [string, string][] = [
    ['{"a":1,"b":[true,null]}', '{"a":1,"b":[true,null]}'],
    [`{"q":"${k}"}`, `{"q":"svc_live_${REDACTED}"}`],
    ['{"password" : "x", "next":"y"}', `{"password" : "${REDACTED}", "next":"y"}`],
    ['{"secret":{"a":"}","b":[1]},"c":2}', `{"secret":"${REDACTED}","c":2}`],
    ['["password","a"]', '["password","a"]'],
    ['{"s":"a\\"b","token":"t"}', `{"s":"a\\"b","token":"${REDACTED}"}`],
    // Cut texts: a value, a string, a name without its value.
    ['{"secret":"svc_whsec_abc', `{"secret":"${REDACTED}"`],
    [`{"q":"${k.slice(0, 20)}`, `{"q":"svc_live_${REDACTED}"`],
    ['{"token":', '{"token":'],
    ['{"error":{"code":"not_found"}}', '{"error":{"code":"not_found"}}'],
  ];
  for (const [text, expected] of table) t.equal(redactJson(text), expected, text);
  t.equal(loggedBody(''), null, 'an empty body is none');
});
