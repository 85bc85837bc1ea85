/**
 * Verifying our webhooks, for receivers (docs/webhooks.md). Self-contained (node:crypto only):
 * copy this file into your receiver, or import it from this package.
 *
 *   const event = verifyWebhook(secret, rawBody, request.headers); // throws
 * WebhookVerificationError
 *
 * It checks the Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature:
 * HMAC-SHA256 of "id.timestamp.body"), accepts any of several `v1,` entries (secret rotation)
 * and rejects timestamps more than `toleranceSeconds` away from now (replays). Pass the RAW body
 * bytes as received: a re-serialized JSON object does not verify. verifyServiceSignature checks
 * the older X-Service-Signature header (hex HMAC of the body alone, no replay protection).
 * Deliveries are at-least-once: be idempotent on `event.id` (the delivery id).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type WebhookVerificationFailure =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'invalid_signature'
  | 'invalid_body';

/** The one error verification throws; `reason` says why (never which bytes differed). */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

export type WebhookEventType = 'listing.created' | 'listing.updated' | 'listing.archived' | 'ping';

/** A delivery's body (openapi `ListingEvent` / `PingEvent`). */
export interface WebhookEvent {
  /** The delivery id: the same on every retry of this event to this endpoint. */
  id: string;
  /** The event id, as listed by GET /api/v1/events. */
  event_id: string;
  type: WebhookEventType;
  created_at: string;
  data: { listing: Record<string, unknown> & { id: string } } | { message: string };
}

/** Node's IncomingHttpHeaders, a fetch Headers object, or a plain lower-case record. */
export type HeaderSource =
  { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Accepted distance between webhook-timestamp and now, both ways. Default 300 s. */
  toleranceSeconds?: number;
  /** The clock, for tests. */
  now?: Date;
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

function equalBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

const toBuffer = (body: string | Uint8Array) =>
  typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);

/**
 * Verifies a delivery with the Standard Webhooks headers and returns its parsed body.
 * `secret` is the endpoint's signing secret (`svc_whsec_…`, shown once at creation).
 */
export function verifyWebhook(
  secret: string,
  rawBody: string | Uint8Array,
  headers: HeaderSource,
  options: VerifyOptions = {},
): WebhookEvent {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError(
      'missing_header',
      'webhook-id, webhook-timestamp and webhook-signature are required',
    );
  }
  if (!/^\d{1,15}$/.test(timestamp))
    throw new WebhookVerificationError(
      'invalid_timestamp',
      'webhook-timestamp must be Unix seconds',
    );
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const sent = Number(timestamp);
  if (sent < now - tolerance)
    throw new WebhookVerificationError('timestamp_too_old', 'webhook-timestamp is too old');
  if (sent > now + tolerance)
    throw new WebhookVerificationError('timestamp_too_new', 'webhook-timestamp is in the future');

  const body = toBuffer(rawBody);
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), body]))
    .digest();
  const matches = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .some((entry) => equalBytes(Buffer.from(entry.slice(3), 'base64'), expected));
  if (!matches)
    throw new WebhookVerificationError('invalid_signature', 'no webhook-signature entry matches');
  return parse(body);
}

/** Verifies X-Service-Signature (hex HMAC-SHA256 of the raw body) and returns the parsed body. */
export function verifyServiceSignature(
  secret: string,
  rawBody: string | Uint8Array,
  signature: string | undefined,
): WebhookEvent {
  if (!signature)
    throw new WebhookVerificationError('missing_header', 'X-Service-Signature is required');
  const body = toBuffer(rawBody);
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest();
  if (!/^[0-9a-f]{64}$/i.test(signature) || !equalBytes(Buffer.from(signature, 'hex'), expected)) {
    throw new WebhookVerificationError('invalid_signature', 'X-Service-Signature does not match');
  }
  return parse(body);
}

function parse(body: Buffer): WebhookEvent {
  try {
    return JSON.parse(body.toString('utf8')) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('invalid_body', 'the body is not JSON');
  }
}
