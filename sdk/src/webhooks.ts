/**
 * Verifying this API's webhook deliveries in a receiver.
 *
 *   const event = await verifyWebhook(secret, rawBody, request.headers); // or throws
 *
 * WebCrypto only (`globalThis.crypto.subtle`: Node 20+, browsers, Deno, Bun, Cloudflare Workers
 * and other edge runtimes), so the SDK imports nothing from Node and verification is async. The
 * HMAC is compared by `crypto.subtle.verify`, which compares in constant time.
 *
 * verifyWebhook checks the Standard Webhooks signature (webhook-id, webhook-timestamp,
 * webhook-signature: HMAC-SHA256 of "id.timestamp.body"), accepts any of several `v1,` entries
 * (secret rotation) and rejects timestamps more than `toleranceSeconds` away from now (replays).
 * verifyServiceSignature checks X-Service-Signature (hex HMAC of the body alone, no replay
 * protection). Both take one secret or several: while an endpoint's secret is being rotated,
 * pass `[newSecret, oldSecret]` and a delivery signed with either verifies (for 24 hours after
 * a rotation both secrets sign every delivery; X-Service-Signature carries the old one).
 * Pass the secret exactly as shown (`svc_whsec_…`). Keys, as the service signs
 * (src/webhooks/signing.ts): X-Service-Signature is keyed with the secret's UTF-8 bytes (the
 * spec's scheme); the Standard Webhooks signature with the 32 bytes the base64 after
 * `svc_whsec_` encodes (what the Standard Webhooks libraries read by default from the secret
 * without its `svc_`), or, for a secret issued before that form, its UTF-8 bytes (standardKey).
 * Pass the RAW body as received: re-serialized JSON does not verify. Deliveries are
 * at-least-once: be idempotent on `event.id` (the delivery id).
 */
import type { Event } from './types.js';

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
  readonly reason: WebhookVerificationFailure;
  constructor(reason: WebhookVerificationFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** A delivery's body: a listing event or a ping (the document's `Event`). */
export type WebhookEvent = Event;
export type WebhookEventType = Event['type'];

/** A fetch `Headers` object, Node's IncomingHttpHeaders, or a plain lower-case record. */
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

const utf8 = new TextEncoder();
// A copy of a Uint8Array: WebCrypto takes buffers it owns (not a SharedArrayBuffer view).
const toBytes = (body: string | Uint8Array) =>
  typeof body === 'string' ? utf8.encode(body) : new Uint8Array(body);

/** One secret, or the secrets of a rotation (any of them may match). */
export type WebhookSecrets = string | readonly string[];

const secretList = (secrets: WebhookSecrets): readonly string[] =>
  typeof secrets === 'string' ? [secrets] : secrets;

/** Decodes base64, or returns undefined for anything that is not. */
function fromBase64(text: string) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  const binary = atob(text);
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

/** The prefix of a secret in the Standard Webhooks form: `whsec_` + base64 of the key. */
const STANDARD_PREFIX = 'whsec_';
/** An endpoint secret as the API shows it: `svc_` + the Standard Webhooks form. */
const ENDPOINT_PREFIX = 'svc_whsec_';
/** The body of a secret of the current form: standard base64 of 32 bytes (44 chars, `=`). */
const CURRENT_BODY = /^[A-Za-z0-9+/]{43}=$/;

/**
 * The Standard Webhooks key of a secret, in any of its three forms:
 * - `whsec_<base64>` (`listen`'s, or an endpoint secret without its `svc_`): the decoded bytes,
 *   as the Standard Webhooks libraries read it by default;
 * - `svc_whsec_` + 44 characters of standard base64 ending in `=` (an endpoint secret as shown):
 *   the same decoded bytes;
 * - any other `svc_whsec_…` (one issued before that form: 43 base64url characters, no `=`): its
 *   UTF-8 bytes, as the service signs with it until the endpoint's secret is rotated.
 */
export function standardKey(secret: string): Uint8Array {
  if (secret.startsWith(ENDPOINT_PREFIX)) {
    const body = secret.slice(ENDPOINT_PREFIX.length);
    return CURRENT_BODY.test(body) ? fromBase64(body)! : utf8.encode(secret);
  }
  if (!secret.startsWith(STANDARD_PREFIX)) return utf8.encode(secret);
  const key = fromBase64(secret.slice(STANDARD_PREFIX.length));
  if (!key?.length) throw new TypeError('a whsec_ secret is whsec_ and base64: copy it whole');
  return key;
}

export function hmacKey(key: Uint8Array, usage: 'sign' | 'verify' = 'verify'): Promise<CryptoKey> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new Error('WebCrypto (globalThis.crypto.subtle) is not available here');
  return subtle.importKey('raw', new Uint8Array(key), { name: 'HMAC', hash: 'SHA-256' }, false, [
    usage,
  ]);
}

function fromHex(text: string) {
  if (!/^[0-9a-f]{64}$/i.test(text)) return undefined;
  return Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

function concat(a: Uint8Array, b: Uint8Array) {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

/**
 * Verifies a delivery with the Standard Webhooks headers and resolves to its parsed body.
 * `secret` is the endpoint's signing secret as shown (`svc_whsec_…`, shown once at creation;
 * `listen`'s `whsec_…`), or during a rotation the new and the old one.
 */
export async function verifyWebhook(
  secret: WebhookSecrets,
  rawBody: string | Uint8Array,
  headers: HeaderSource,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError(
      'missing_header',
      'webhook-id, webhook-timestamp and webhook-signature are required',
    );
  }
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError(
      'invalid_timestamp',
      'webhook-timestamp must be Unix seconds',
    );
  }
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const sent = Number(timestamp);
  if (sent < now - tolerance)
    throw new WebhookVerificationError('timestamp_too_old', 'webhook-timestamp is too old');
  if (sent > now + tolerance)
    throw new WebhookVerificationError('timestamp_too_new', 'webhook-timestamp is in the future');

  const body = toBytes(rawBody);
  const signed = concat(utf8.encode(`${id}.${timestamp}.`), body);
  const macs = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => fromBase64(entry.slice(3)));
  for (const one of secretList(secret)) {
    const key = await hmacKey(standardKey(one));
    for (const mac of macs) {
      if (mac && (await crypto.subtle.verify('HMAC', key, mac, signed))) return parse(body);
    }
  }
  throw new WebhookVerificationError('invalid_signature', 'no webhook-signature entry matches');
}

/**
 * Verifies X-Service-Signature (hex HMAC-SHA256 of the raw body, keyed with the secret's UTF-8
 * bytes) and resolves to the parsed body.
 */
export async function verifyServiceSignature(
  secret: WebhookSecrets,
  rawBody: string | Uint8Array,
  signature: string | undefined,
): Promise<WebhookEvent> {
  if (!signature)
    throw new WebhookVerificationError('missing_header', 'X-Service-Signature is required');
  const body = toBytes(rawBody);
  const mac = fromHex(signature);
  if (mac) {
    for (const one of secretList(secret)) {
      const key = await hmacKey(utf8.encode(one));
      if (await crypto.subtle.verify('HMAC', key, mac, body)) return parse(body);
    }
  }
  throw new WebhookVerificationError('invalid_signature', 'X-Service-Signature does not match');
}

function parse(body: Uint8Array): WebhookEvent {
  try {
    return JSON.parse(new TextDecoder().decode(body)) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('invalid_body', 'the body is not JSON');
  }
}
