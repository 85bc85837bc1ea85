/**
 * The signatures we send and the receivers' helper (the SDK's sdk/src/webhooks.ts), no server:
 * X-Service-Signature is the hex HMAC of the raw body; webhook-signature follows Standard
 * Webhooks (v1, base64 HMAC of "id.timestamp.body", several entries for rotation); the helper
 * fails with one typed error.
 */
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import t from 'tap';
import {
  newSigningSecret,
  serviceSignature,
  standardKey,
  standardSignature,
  webhookBody,
  webhookHeaders,
} from '../../src/webhooks/signing.ts';
import { deliveryRequest } from '../../sdk/src/listen.ts';
import {
  verifyServiceSignature,
  verifyWebhook,
  WebhookVerificationError,
} from '../../sdk/src/webhooks.ts';

const secret = 'svc_whsec_Z3JlYXQgc2VjcmV0cyBhcmUgbG9uZyBhbmQgcmFuZG9tIQ';
const other = 'svc_whsec_another-secret-another-secret-another-s';
const body = webhookBody({
  deliveryId: 'a'.repeat(32),
  eventId: 'b'.repeat(32),
  type: 'listing.created',
  createdAt: '2026-11-20T14:03:12.130551Z',
  data: '{"listing":{"id":"6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d","title":"Caf\u00e9 chair \ud83e\ude91"}}',
});
const now = new Date('2026-11-20T14:03:13Z');
const timestamp = Math.floor(now.getTime() / 1000);
const headers = webhookHeaders({
  deliveryId: 'a'.repeat(32),
  type: 'listing.created',
  body,
  secrets: [secret],
  timestamp,
});

t.test('the headers and signatures, computed independently', async (t) => {
  t.strictSame(JSON.parse(body), {
    id: 'a'.repeat(32),
    event_id: 'b'.repeat(32),
    type: 'listing.created',
    created_at: '2026-11-20T14:03:12.130551Z',
    data: { listing: { id: '6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', title: 'Café chair 🪑' } },
  });
  const hex = createHmac('sha256', secret).update(Buffer.from(body, 'utf8')).digest('hex');
  // What the standard-webhooks libraries compute with `new Webhook(base64(secret bytes))`.
  const key = Buffer.from(Buffer.from(secret, 'utf8').toString('base64'), 'base64');
  const standard = createHmac('sha256', key)
    .update(`${'a'.repeat(32)}.${timestamp}.${body}`)
    .digest('base64');
  t.strictSame(headers, {
    'content-type': 'application/json',
    'user-agent': 'Service-Webhooks/1.0',
    'x-service-signature': hex,
    'x-service-event': 'listing.created',
    'x-service-delivery': 'a'.repeat(32),
    'webhook-id': 'a'.repeat(32),
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${standard}`,
  });
  t.equal(serviceSignature(secret, body), hex);
  t.equal(standardSignature(secret, 'a'.repeat(32), timestamp, body), `v1,${standard}`);
  const rotating = webhookHeaders({
    deliveryId: 'a'.repeat(32),
    type: 'ping',
    body,
    secrets: [other, secret],
    timestamp,
  });
  t.equal(
    rotating['webhook-signature']!.split(' ').length,
    2,
    'one entry per secret while rotating',
  );
});

t.test('verifyWebhook accepts a genuine delivery in every header shape', async (t) => {
  const event = await verifyWebhook(secret, Buffer.from(body, 'utf8'), headers, { now });
  t.match(event, { id: 'a'.repeat(32), event_id: 'b'.repeat(32), type: 'listing.created' });
  t.match(
    await verifyWebhook(secret, body, new Headers(headers), { now }),
    { id: 'a'.repeat(32) },
    'a fetch Headers object',
  );
  t.match(
    await verifyWebhook(
      secret,
      new Uint8Array(Buffer.from(body)),
      { ...headers, 'webhook-id': [headers['webhook-id']!] },
      { now },
    ),
    { type: 'listing.created' },
  );
  const rotating = webhookHeaders({
    deliveryId: 'a'.repeat(32),
    type: 'listing.created',
    body,
    secrets: [other, secret],
    timestamp,
  });
  t.ok(
    await verifyWebhook(secret, body, rotating, { now }),
    'any matching entry verifies (rotation)',
  );
  t.ok(await verifyWebhook(other, body, rotating, { now }));
  t.ok(
    await verifyWebhook(
      secret,
      body,
      { ...headers, 'webhook-signature': `v2,abc ${headers['webhook-signature']}` },
      { now },
    ),
    'unknown versions are skipped',
  );
  t.match(await verifyServiceSignature(secret, body, headers['x-service-signature']), {
    id: 'a'.repeat(32),
  });
});

t.test('verifyWebhook rejects with one typed error', async (t) => {
  const rejects = (reason: string, run: () => Promise<unknown>, message: string) =>
    t.rejects(run, { name: 'WebhookVerificationError', reason }, message);
  await rejects(
    'invalid_signature',
    () => verifyWebhook(other, body, headers, { now }),
    'another secret',
  );
  await rejects(
    'invalid_signature',
    () => verifyWebhook(secret, body.replace('Caf', 'Cof'), headers, { now }),
    'a tampered body',
  );
  await rejects(
    'invalid_signature',
    () => verifyWebhook(secret, JSON.stringify(JSON.parse(body), null, 1), headers, { now }),
    'a re-serialized body',
  );
  await rejects(
    'invalid_signature',
    () => verifyWebhook(secret, body, { ...headers, 'webhook-id': 'c'.repeat(32) }, { now }),
    'another id',
  );
  await rejects(
    'invalid_signature',
    () =>
      verifyWebhook(
        secret,
        body,
        { ...headers, 'webhook-timestamp': String(timestamp + 1) },
        { now },
      ),
    'a changed timestamp',
  );
  await rejects(
    'invalid_signature',
    () => verifyWebhook(secret, body, { ...headers, 'webhook-signature': 'v1,' }, { now }),
    'an empty signature',
  );
  await rejects(
    'timestamp_too_old',
    () => verifyWebhook(secret, body, headers, { now: new Date(now.getTime() + 301_000) }),
    'a replay after 5 minutes',
  );
  await rejects(
    'timestamp_too_new',
    () => verifyWebhook(secret, body, headers, { now: new Date(now.getTime() - 301_000) }),
    'from the future',
  );
  t.ok(
    await verifyWebhook(secret, body, headers, {
      now: new Date(now.getTime() + 3_600_000),
      toleranceSeconds: 7200,
    }),
    'tolerance is configurable',
  );
  await rejects(
    'invalid_timestamp',
    () => verifyWebhook(secret, body, { ...headers, 'webhook-timestamp': '1e9' }, { now }),
    'a malformed timestamp',
  );
  await rejects(
    'missing_header',
    () =>
      verifyWebhook(
        secret,
        body,
        { 'x-service-signature': headers['x-service-signature'] },
        { now },
      ),
    'no Standard Webhooks headers',
  );
  await rejects(
    'invalid_signature',
    () => verifyServiceSignature(other, body, headers['x-service-signature']),
    'X-Service-Signature, another secret',
  );
  await rejects(
    'invalid_signature',
    () => verifyServiceSignature(secret, body, 'zz'),
    'X-Service-Signature, not hex',
  );
  await rejects(
    'missing_header',
    () => verifyServiceSignature(secret, body, undefined),
    'X-Service-Signature missing',
  );
  const signedGarbage = webhookHeaders({
    deliveryId: 'a'.repeat(32),
    type: 'ping',
    body: 'not json',
    secrets: [secret],
    timestamp,
  });
  await rejects(
    'invalid_body',
    () => verifyWebhook(secret, 'not json', signedGarbage, { now }),
    'a signed body that is not JSON',
  );
  try {
    await verifyWebhook(other, body, headers, { now });
  } catch (err) {
    t.ok(err instanceof WebhookVerificationError, 'an instance of WebhookVerificationError');
    t.ok(err instanceof Error);
  }
});

t.test('a secret of the current form: both headers, each by its own standard', async (t) => {
  const fresh = newSigningSecret();
  t.match(fresh, /^svc_whsec_[A-Za-z0-9+/]{43}=$/, 'svc_whsec_ + base64 of 32 bytes (CONTRACT 6)');
  t.equal(standardKey(fresh).length, 32);
  t.strictSame(standardKey(fresh), Buffer.from(fresh.slice('svc_whsec_'.length), 'base64'));
  // The one step docs/webhooks.md documents for the Standard Webhooks libraries.
  const standardForm = fresh.replace(/^svc_/, '');
  t.match(standardForm, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.not(newSigningSecret(), fresh);
  const signed = webhookHeaders({
    deliveryId: 'a'.repeat(32),
    type: 'listing.created',
    body,
    secrets: [fresh],
    timestamp: Math.floor(Date.now() / 1000),
  });
  t.equal(
    signed['x-service-signature'],
    createHmac('sha256', fresh).update(body).digest('hex'),
    'X-Service-Signature: keyed with the secret as shown (the spec, section 6)',
  );
  t.match(
    new Webhook(standardForm).verify(body, signed),
    { id: 'a'.repeat(32) },
    'standardwebhooks, default mode, the secret without svc_',
  );
  t.doesNotThrow(() => new SvixWebhook(standardForm).verify(body, signed), 'svix, likewise');
  t.ok(await verifyWebhook(fresh, body, signed), 'the SDK, the secret as shown');
  t.ok(await verifyWebhook(standardForm, body, signed), 'the SDK, its standard form too');
  t.ok(await verifyServiceSignature(fresh, body, signed['x-service-signature']));
  t.throws(
    () => new Webhook(fresh, { format: 'raw' }).verify(body, signed),
    'the UTF-8 bytes of the whole string are not the key any more',
  );
  await t.rejects(verifyWebhook('whsec_not base64!', body, signed), TypeError, 'a cut secret');

  // The SDK's listen signs as the service does (the same bytes for the same delivery).
  const event = JSON.parse(body) as Parameters<typeof deliveryRequest>[0];
  const local = await deliveryRequest(event, fresh, 'a'.repeat(32), timestamp);
  const listenSecret = await deliveryRequest(event, standardForm, 'a'.repeat(32), timestamp);
  t.equal(
    listenSecret.headers['webhook-signature'],
    local.headers['webhook-signature'],
    'a whsec_ secret (listen) keys webhook-signature with the same bytes',
  );
  const server = webhookHeaders({
    deliveryId: 'a'.repeat(32),
    type: 'listing.created',
    body: local.body,
    secrets: [fresh],
    timestamp,
  });
  t.equal(local.headers['webhook-signature'], server['webhook-signature']);
  t.equal(local.headers['x-service-signature'], server['x-service-signature']);
});

t.test('a secret issued before the standard form signs as it did', async (t) => {
  // `secret` above is one (svc_whsec_…): both headers keyed with its UTF-8 bytes, so a Standard
  // Webhooks library takes it as `whsec_` + base64 of the string (docs/webhooks.md).
  const asStandard = `whsec_${Buffer.from(secret).toString('base64')}`;
  const fresh: Record<string, string> = {
    ...headers,
    'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
  };
  fresh['webhook-signature'] = standardSignature(
    secret,
    'a'.repeat(32),
    Number(fresh['webhook-timestamp']),
    body,
  );
  t.ok(new Webhook(asStandard).verify(body, fresh), 'its standard form verifies');
  t.ok(new Webhook(secret, { format: 'raw' }).verify(body, fresh), 'and the old raw mode');
  t.equal(standardKey(secret).toString('utf8'), secret);
});

t.test('the key is chosen by the shape of the secret', async (t) => {
  // A secret of before the current form: `svc_whsec_` + 43 base64url characters, no `=`. Even
  // when its characters are all in the standard alphabet it is keyed with its UTF-8 bytes.
  const before = `svc_whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`;
  t.match(before, /^svc_whsec_[A-Za-z0-9_-]{43}$/);
  t.equal(standardKey(before).toString('utf8'), before, 'base64url, no =: its UTF-8 bytes');
  const plain = `svc_whsec_${'A'.repeat(43)}`;
  t.equal(standardKey(plain).toString('utf8'), plain, '43 standard characters, no =: UTF-8');
  const current = `svc_whsec_${Buffer.alloc(32, 0xfb).toString('base64')}`;
  t.strictSame(standardKey(current), Buffer.alloc(32, 0xfb), '44 characters ending in =: decoded');
  // The SDK's verifier chooses alike (it signs listen's forwards and verifies receivers').
  const stamp = Math.floor(Date.now() / 1000);
  for (const one of [before, plain, current]) {
    const signed = webhookHeaders({
      deliveryId: 'a'.repeat(32),
      type: 'listing.created',
      body,
      secrets: [one],
      timestamp: stamp,
    });
    t.ok(await verifyWebhook(one, body, signed), `the SDK verifies ${one.slice(0, 14)}…`);
  }
});
