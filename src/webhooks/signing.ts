/**
 * The two signatures every delivery carries (docs/webhooks.md, "Verifying signatures"):
 * - X-Service-Signature: lowercase hex HMAC-SHA256 of the raw body, keyed with the endpoint
 *   secret as shown, its UTF-8 bytes (the spec's scheme, section 6, and the released v1
 *   document's words: a receiver written from them keeps working, whatever the secret's form);
 * - Standard Webhooks (https://www.standardwebhooks.com): webhook-id, webhook-timestamp and
 *   webhook-signature = space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one
 *   entry per secret, so secrets can be rotated and receivers can reject replays. Its key is
 *   what the Standard Webhooks libraries take from the secret in their default mode
 *   (standardKey), so `new Webhook(secret)` verifies with the secret as shown.
 * Receivers verify with the SDK's verifyWebhook (sdk/src/webhooks.ts), which keys them alike.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { PREFIX } from '../lib/secrets.ts';

const USER_AGENT = 'Service-Webhooks/1.0';

/** A new signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks form). */
export function newSigningSecret(): string {
  return PREFIX.webhookSecret + randomBytes(32).toString('base64');
}

/**
 * The Standard Webhooks key of a secret. `whsec_<base64>` (every secret issued since the
 * secrets took that form): the decoded bytes, as the libraries' default mode reads it. A secret
 * issued before (`svc_whsec_…`, until its endpoint's next rotation): its UTF-8 bytes, as it
 * signed then, so its receivers verify unchanged; the standard form of that same key is
 * `whsec_` + base64 of the old string (docs/webhooks.md, "Secrets issued before").
 */
export function standardKey(secret: string): Buffer {
  return secret.startsWith(PREFIX.webhookSecret)
    ? Buffer.from(secret.slice(PREFIX.webhookSecret.length), 'base64')
    : Buffer.from(secret, 'utf8');
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
