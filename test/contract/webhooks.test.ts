/**
 * Contract tests of the Webhooks operations (/api/v1/webhook_endpoints): their documented
 * examples replayed with real API keys carrying webhooks:write (a sandbox and a live key of a
 * production-approved app), then a scenario for every documented status that can be produced
 * for real.
 */
import t from 'tap';
import type { Asserter } from './recorder.ts';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite, MiB, UNKNOWN_ID } from './support.ts';

const suite = await contractSuite(t);
const { app, keys, seller, rival, send, unauthorized, tokens } = suite;
// Live endpoints need a production-approved app (the replay's live key creates one).
await app.services.apps.approve(seller.appId);
const replay = replayExamples(t, suite, 'Webhooks');

const URL = 'https://93.184.215.14/hooks/scenario';
const credential = keys.webhooksSandbox;

/** A sandbox endpoint of the seller's app, made through the API. */
async function endpoint(t: Asserter, label: string): Promise<string> {
  const res = await send(t, {
    op: 'createWebhookEndpoint',
    label: `fixture: ${label}`,
    credential,
    body: { url: URL },
    expect: 201,
  });
  return String(res.json?.data?.id);
}

t.test('createWebhookEndpoint', async (t) => {
  const op = 'createWebhookEndpoint';
  await send(t, {
    op,
    label: 'events',
    credential,
    body: { url: URL, enabled_events: ['listing.matched'] },
    expect: 201,
  });
  await send(t, {
    op,
    label: 'http URL',
    credential,
    body: { url: 'http://93.184.215.14/h' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'internal host',
    credential,
    body: { url: 'https://10.1.2.3/h' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'unknown event type',
    credential,
    body: { url: URL, enabled_events: ['ping'] },
    expect: 400,
  });
  await send(t, { op, label: 'malformed JSON', credential, rawBody: '{"url": ', expect: 400 });
  await send(t, { op, label: 'no credential', body: { url: URL }, expect: 401 });
  await unauthorized(t, op, {}, { body: { url: URL } });
  await send(t, {
    op,
    label: 'key without webhooks:write',
    credential: keys.sandbox,
    body: { url: URL },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'OAuth access token',
    credential: tokens.full,
    body: { url: URL },
    expect: 403,
  });
  // A live key of an app without production approval.
  const rivalLive = (
    await app.services.keys.create({ appId: rival.appId, env: 'live', scopes: 'webhooks:write' })
  ).key;
  await send(t, {
    op,
    label: 'live, app not approved',
    credential: rivalLive,
    body: { url: URL },
    expect: 403,
  });
  const full = (
    await app.services.keys.create({ appId: rival.appId, env: 'sandbox', scopes: 'webhooks:write' })
  ).key;
  for (let i = 0; i < 16; i += 1)
    await send(t, {
      op,
      label: `the rival's endpoint ${i + 1}`,
      credential: full,
      body: { url: URL },
      expect: 201,
    });
  await send(t, {
    op,
    label: 'the 17th active endpoint',
    credential: full,
    body: { url: URL },
    expect: 409,
  });
  await send(t, {
    op,
    label: 'over 1 MiB',
    credential,
    rawBody: JSON.stringify({ url: URL, x: 'x'.repeat(MiB) }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'form body',
    credential,
    rawBody: `url=${URL}`,
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('listWebhookEndpoints', async (t) => {
  const op = 'listWebhookEndpoints';
  const first = await send(t, {
    op,
    label: 'a page of 1',
    credential,
    query: { limit: '1' },
    expect: 200,
  });
  await send(t, {
    op,
    label: 'the next page',
    credential,
    query: { limit: '1', cursor: String(first.json?.meta?.next_cursor) },
    expect: 200,
  });
  await send(t, { op, label: 'limit=0', credential, query: { limit: '0' }, expect: 400 });
  await send(t, {
    op,
    label: 'altered cursor',
    credential,
    query: { cursor: 'bm9wZQ' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  await send(t, { op, label: 'OAuth access token', credential: tokens.full, expect: 403 });
});

t.test('getWebhookEndpoint', async (t) => {
  const op = 'getWebhookEndpoint';
  const id = await endpoint(t, 'to read');
  await send(t, { op, label: 'bad id', credential, path: { id: 'nope' }, expect: 400 });
  await send(t, { op, label: 'no credential', path: { id }, expect: 401 });
  await unauthorized(t, op, { id });
  await send(t, {
    op,
    label: 'OAuth access token',
    credential: tokens.full,
    path: { id },
    expect: 403,
  });
  await send(t, { op, label: 'unknown id', credential, path: { id: UNKNOWN_ID }, expect: 404 });
  await send(t, {
    op,
    label: 'from the live key',
    credential: keys.webhooksLive,
    path: { id },
    expect: 404,
  });
});

t.test('updateWebhookEndpoint', async (t) => {
  const op = 'updateWebhookEndpoint';
  const id = await endpoint(t, 'to update');
  await send(t, {
    op,
    label: 'disable',
    credential,
    path: { id },
    body: { disabled: true },
    expect: 200,
  });
  // The check ping of a re-enable goes to a public address no test can answer: refused.
  await send(t, {
    op,
    label: 're-enable, the ping unanswered',
    credential,
    path: { id },
    body: { disabled: false },
    expect: [409],
  });
  await send(t, { op, label: 'empty body', credential, path: { id }, body: {}, expect: 400 });
  await send(t, {
    op,
    label: 'malformed JSON',
    credential,
    path: { id },
    rawBody: '{',
    expect: 400,
  });
  await send(t, {
    op,
    label: 'no credential',
    path: { id },
    body: { disabled: true },
    expect: 401,
  });
  await unauthorized(t, op, { id }, { body: { disabled: true } });
  await send(t, {
    op,
    label: 'OAuth access token',
    credential: tokens.full,
    path: { id },
    body: { disabled: true },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'unknown id',
    credential,
    path: { id: UNKNOWN_ID },
    body: { disabled: true },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'over 1 MiB',
    credential,
    path: { id },
    rawBody: JSON.stringify({ url: URL, x: 'x'.repeat(MiB) }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'form body',
    credential,
    path: { id },
    rawBody: 'disabled=true',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('deleteWebhookEndpoint', async (t) => {
  const op = 'deleteWebhookEndpoint';
  const id = await endpoint(t, 'to delete');
  await send(t, { op, label: 'bad id', credential, path: { id: 'nope' }, expect: 400 });
  await send(t, { op, label: 'no credential', path: { id }, expect: 401 });
  await unauthorized(t, op, { id });
  await send(t, {
    op,
    label: 'OAuth access token',
    credential: tokens.full,
    path: { id },
    expect: 403,
  });
  await send(t, { op, label: 'delete', credential, path: { id }, expect: 204 });
  await send(t, { op, label: 'again', credential, path: { id }, expect: 404 });
});

checkCoverage(t, suite, replay);
