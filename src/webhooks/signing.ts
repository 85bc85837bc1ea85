/**
 * The two signatures every delivery carries (docs/webhooks.md, "Verifying signatures"):
 * - X-Service-Signature: lowercase hex HMAC-SHA256 of the raw body, keyed with the endpoint
 *   secret as shown, its UTF-8 bytes (the spec's scheme, section 6, and the released v1
 *   document's words: a receiver written from them keeps working, whatever the secret's form);
 * - Standard Webhooks (https://www.standardwebhooks.com): webhook-id, webhook-timestamp and
 *   webhook-signature = space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one
 *   entry per secret, so secrets can be rotated and receivers can reject replays. Its key is
 *   what the Standard Webhooks libraries take in their default mode from the secret without its
 *   `svc_` (standardKey), so `new Webhook(secret.replace(/^svc_/, ''))` verifies.
 * Receivers verify with the SDK's verifyWebhook (sdk/src/webhooks.ts), which keys them alike.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { PREFIX } from '../lib/secrets.ts';

const USER_AGENT = 'Service-Webhooks/1.0';

/**
 * A new endpoint signing secret: `svc_whsec_` (CONTRACT.md section 6) + standard base64 of 32
 * random bytes, 44 characters ending in `=`. Without its `svc_` it is the Standard Webhooks form
 * (`whsec_` + base64 of the key), which those libraries take in their default mode.
 */
export function newSigningSecret(): string {
  return PREFIX.webhookSecret + randomBytes(32).toString('base64');
}

/** The body of a secret issued in the current form: standard base64 of 32 bytes (44 chars, `=`). */
const CURRENT_BODY = /^[A-Za-z0-9+/]{43}=$/;

/**
 * The Standard Webhooks key of a secret, told apart by its shape:
 * - `svc_whsec_` + a 44-character standard-base64 body ending in `=` (every endpoint secret
 *   issued since this form): the 32 decoded bytes, which is what the Standard Webhooks
 *   libraries read by default from the secret without its `svc_` (`whsec_<base64>`);
 * - anything else, in practice `svc_whsec_` + 43 base64url characters, no `=` (endpoint secrets
 *   issued before, until their endpoint's next rotation): the UTF-8 bytes of the whole string,
 *   as they signed then, so their receivers verify unchanged.
 * The two cannot be confused: a base64url body of 43 characters never ends in `=`.
 */
export function standardKey(secret: string): Buffer {
  const body = secret.startsWith(PREFIX.webhookSecret)
    ? secret.slice(PREFIX.webhookSecret.length)
    : '';
  return CURRENT_BODY.test(body) ? Buffer.from(body, 'base64') : Buffer.from(secret, 'utf8');
}

export function serviceSignature(secret: string, body: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(body, 'utf8').digest('hex');
}

export function standardSignature(
  secret: string,
  id: string,
  timestamp: number,
  body: string,
): string {
  const mac = createHmac('sha256', standardKey(secret))
    .update(`${id}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return `v1,${mac}`;
}

export interface SignedRequest {
  deliveryId: string;
  type: string;
  body: string;
  /** The first secret signs X-Service-Signature; each one adds a webhook-signature entry. */
  secrets: readonly [string, ...string[]];
  /** Unix seconds of this attempt (new on every retry; the id stays). */
  timestamp: number;
}

/** Every header of one delivery attempt. */
export function webhookHeaders(request: SignedRequest): Record<string, string> {
  const { deliveryId, type, body, secrets, timestamp } = request;
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-service-signature': serviceSignature(secrets[0], body),
    'x-service-event': type,
    'x-service-delivery': deliveryId,
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets
      .map((secret) => standardSignature(secret, deliveryId, timestamp, body))
      .join(' '),
  };
}

/**
 * The body of a delivery: `id` is the delivery id (the same on every attempt), `event_id` the
 * event's id (as listed by GET /api/v1/events). `data` is the stored JSON text, inserted
 * verbatim, so every attempt sends the same bytes.
 */
export function webhookBody(input: {
  deliveryId: string;
  eventId: string;
  type: string;
  createdAt: string;
  data: string;
}): string {
  return (
    `{"id":${JSON.stringify(input.deliveryId)},"event_id":${JSON.stringify(input.eventId)},` +
    `"type":${JSON.stringify(input.type)},"created_at":${JSON.stringify(input.createdAt)},"data":${input.data}}`
  );
}
