/**
 * Webhooks on a developer's machine without a public URL (the `listen` command, ./cli.ts, and
 * this library function): long-polls GET /api/v1/events?wait= from now (or from `since`) and
 * POSTs each event to a local URL as a real delivery would, with the same body and the same
 * headers (X-Service-Signature and the Standard Webhooks headers), signed with a secret of the
 * developer's in the Standard Webhooks form (`whsec_` + base64: an endpoint's secret without
 * its `svc_`, keyed as ./webhooks.ts says), so the receiver's verification code, or a Standard
 * Webhooks library in its default mode, runs unchanged with that secret. It registers nothing:
 * the app's webhook endpoints are never touched.
 *
 * fetch and WebCrypto only (runs where the client runs). Each event is forwarded once, in order;
 * the local answer is reported, never retried (this is a development tool: the event stays in
 * GET /api/v1/events). Forwards go to loopback hosts only unless `allowRemote` says otherwise;
 * the credential goes over https, or plain http to a loopback host, unless `allowInsecureHttp`
 * says otherwise. A `*.localhost` host is loopback by name (RFC 6761 §6.3) and is reached at
 * 127.0.0.1 without asking a resolver, whose answer for it could name any machine.
 */
import { createMarketplaceClient, type MarketplaceClientOptions } from './client.js';
import { errorFromResponse } from './errors.js';
import type { Event, EventType } from './types.js';
import { hmacKey, standardKey } from './webhooks.js';

export interface ListenOptions {
  /** The API's host, as for createMarketplaceClient. */
  baseUrl: string;
  /** apiKeyAuth(key) or oauthTokenAuth(token): the app whose events are forwarded. */
  auth: NonNullable<MarketplaceClientOptions['auth']>;
  /** Where each event is POSTed (`http://localhost:4000/hooks`). */
  forwardTo: string;
  /** The signing secret the receiver verifies with (newListenSecret() makes one). */
  secret: string;
  /** Only these event types (default: all). */
  events?: readonly EventType[];
  /**
   * Start after this instant (an ISO 8601 timestamp of the last 30 days): the events recorded
   * since are forwarded first. Default: now.
   */
  since?: string;
  /** Forward to a host that is not loopback (off: a mistyped URL must not leak events). */
  allowRemote?: boolean;
  /**
   * Send the credential over plain http to an API host that is not loopback (off: anyone on the
   * way could read the key and act as the app).
   */
  allowInsecureHttp?: boolean;
  /** Stops listening (Ctrl-C); the promise then resolves. */
  signal?: AbortSignal;
  /** Each forward's outcome, in order (the command prints one line each). */
  onForward?: (forward: Forward) => void;
  /** A poll that failed and will be tried again (network, 429, 503). */
  onRetry?: (error: unknown, delayMs: number) => void;
  /** Called once the first poll has been answered: events from then on are forwarded. */
  onReady?: (cursor: string) => void;
  /** The local request's timeout, ms (default 8000, as WEBHOOK_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Seconds each poll waits (default 25, at most 30). */
  waitSeconds?: number;
  /** A fetch to use instead of globalThis.fetch (the API's and the forwards'). */
  fetch?: typeof fetch;
}

export interface Forward {
  eventId: string;
  /** The delivery id sent (body `id`, `webhook-id`), new for each forward. */
  deliveryId: string;
  type: EventType;
  /** The local answer's status, or null when there was none (error says why). */
  status: number | null;
  error?: string;
  ms: number;
}

/** Thrown before anything is sent for a forward URL that is not allowed. */
export class ListenError extends Error {
  override name = 'ListenError';
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/**
 * The URL to fetch for `url`: a `*.localhost` host is replaced by 127.0.0.1 (same port, path and
 * query). Such a name is loopback by definition (RFC 6761 §6.3), but handed to the system's
 * resolver it is looked up like any other (most have no entry for it; a DNS server may answer
 * with any address): the events or the key would then go wherever that answer says. `localhost`
 * itself stays as written: the system maps it to its own loopback addresses.
 */
function reachable(url: string): string {
  const pinned = new URL(url);
  if (!pinned.hostname.toLowerCase().endsWith('.localhost')) return url;
  pinned.hostname = '127.0.0.1';
  return pinned.href;
}

/** true for localhost, *.localhost, 127.0.0.0/8 and ::1 (what `allowRemote` is needed beside). */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.toLowerCase();
  return (
    LOOPBACK_NAMES.has(host) ||
    host.endsWith('.localhost') ||
    /^127(\.\d{1,3}){3}$/.test(host) ||
    host === '[0:0:0:0:0:0:0:1]'
  );
}

const utf8 = new TextEncoder();
const base64 = (bytes: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(bytes)));
const hex = (bytes: ArrayBuffer) =>
  Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
const randomHex = (bytes: number) => hex(crypto.getRandomValues(new Uint8Array(bytes)).buffer);

/**
 * A new signing secret for listen: `whsec_` and base64 of 32 random bytes, the Standard Webhooks
 * form, which those libraries take as it is (an endpoint's secret is `svc_` + this form; this one
 * is the developer's own, not an endpoint secret, so it has no `svc_`).
 */
export function newListenSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

async function hmac(key: Uint8Array, message: string): Promise<ArrayBuffer> {
  return crypto.subtle.sign('HMAC', await hmacKey(key, 'sign'), utf8.encode(message));
}

/**
 * The request a real delivery of `event` would be (src/webhooks/signing.ts on the server):
 * body `{ id, event_id, type, created_at, data }` with `id` the delivery id, and its headers.
 */
export async function deliveryRequest(
  event: Event,
  secret: string,
  deliveryId: string = randomHex(16),
  timestamp: number = Math.floor(Date.now() / 1000),
): Promise<{ body: string; headers: Record<string, string> }> {
  const body =
    `{"id":${JSON.stringify(deliveryId)},"event_id":${JSON.stringify(event.event_id)},` +
    `"type":${JSON.stringify(event.type)},"created_at":${JSON.stringify(event.created_at)},` +
    `"data":${JSON.stringify(event.data)}}`;
  const standard = base64(await hmac(standardKey(secret), `${deliveryId}.${timestamp}.${body}`));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'Service-Webhooks/1.0',
      'x-service-signature': hex(await hmac(utf8.encode(secret), body)),
      'x-service-event': event.type,
      'x-service-delivery': deliveryId,
      'webhook-id': deliveryId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': `v1,${standard}`,
    },
  };
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done);
  });

/** Event ids already forwarded, remembered for the last few thousand (deliveries may repeat). */
const REMEMBERED = 5000;

/**
 * The API's host as the commands (listen, trigger) call it: https, or plain http to this machine
 * unless `allowInsecureHttp` (the key would cross the network readable); a ListenError otherwise.
 */
export function apiBaseUrl(url: string, allowInsecureHttp: boolean): string {
  let apiUrl: URL;
  try {
    apiUrl = new URL(url);
  } catch {
    throw new ListenError(`The API URL is not a URL: ${url}`);
  }
  if (apiUrl.protocol !== 'http:' && apiUrl.protocol !== 'https:')
    throw new ListenError('The API URL must be an https URL');
  if (apiUrl.protocol === 'http:' && !allowInsecureHttp && !isLoopbackUrl(apiUrl.href))
    throw new ListenError(
      `The API URL ${apiUrl.origin} is plain http to a host that is not this machine: the key ` +
        'would cross the network readable. Use https, or allow it explicitly ' +
        '(--allow-insecure-http)',
    );
  return reachable(url);
}

/**
 * Forwards the app's events to `forwardTo` until `signal` aborts. Rejects with ListenError for a
 * forward URL that is not allowed, and with MarketplaceApiError when the API refuses the
 * credential (401, 403, 400); network errors, 429 and 503 are waited out (Retry-After).
 */
export async function listen(options: ListenOptions): Promise<void> {
  let target: URL;
  try {
    target = new URL(options.forwardTo);
  } catch {
    throw new ListenError(`--forward-to is not a URL: ${options.forwardTo}`);
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:')
    throw new ListenError('--forward-to must be an http or https URL');
  if (!options.allowRemote && !isLoopbackUrl(options.forwardTo))
    throw new ListenError(
      `${target.host} is not this machine: listen forwards to loopback hosts only ` +
        '(localhost, *.localhost, 127.0.0.1, ::1) unless allowed explicitly (--allow-remote)',
    );
  const baseUrl = apiBaseUrl(options.baseUrl, options.allowInsecureHttp ?? false);
  const forwardTo = reachable(options.forwardTo);
  const doFetch = options.fetch ?? globalThis.fetch;
  const api = createMarketplaceClient({
    baseUrl,
    auth: options.auth,
    fetch: (request) => doFetch(request),
  });
  const wait = Math.min(30, Math.max(1, options.waitSeconds ?? 25));
  const only = options.events && options.events.length > 0 ? new Set(options.events) : null;
  // One type is filtered by the API; several, here.
  const type = only?.size === 1 ? [...only][0] : undefined;
  const seen = new Set<string>();
  let cursor = options.since;
  let failures = 0;
  let ready = false;
  const { signal } = options;

  while (!signal?.aborted) {
    let page: Event[];
    try {
      const result = await api.raw.GET('/api/v1/events', {
        params: { query: { wait: ready || cursor ? wait : 0, limit: 100, cursor, type } },
        ...(signal ? { signal } : {}),
      });
      if (!result.response.ok) throw errorFromResponse(result.response, result.error);
      page = result.data!.data;
      cursor = result.data!.meta.next_cursor ?? cursor;
      failures = 0;
    } catch (err) {
      if (signal?.aborted) return;
      const status = (err as { status?: number }).status;
      if (status !== undefined && status !== 429 && status < 500) throw err;
      failures += 1;
      const retryAfter = (err as { retryAfter?: number }).retryAfter;
      const delay =
        retryAfter !== undefined ? retryAfter * 1000 : Math.min(10_000, 500 * 2 ** failures);
      options.onRetry?.(err, delay);
      await sleep(delay, signal);
      continue;
    }
    if (!ready) {
      ready = true;
      options.onReady?.(cursor!);
    }
    for (const event of page) {
      if (signal?.aborted) return;
      if (seen.has(event.event_id) || (only && !only.has(event.type))) continue;
      seen.add(event.event_id);
      if (seen.size > REMEMBERED) seen.delete(seen.values().next().value!);
      options.onForward?.(await forward(event, { ...options, forwardTo }, doFetch));
    }
  }
}

async function forward(event: Event, options: ListenOptions, doFetch: typeof fetch) {
  const { body, headers } = await deliveryRequest(event, options.secret);
  const deliveryId = headers['webhook-id']!;
  const started = Date.now();
  const result: Forward = {
    eventId: event.event_id,
    deliveryId,
    type: event.type,
    status: null,
    ms: 0,
  };
  try {
    const answer = await doFetch(options.forwardTo, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? 8000),
    });
    result.status = answer.status;
    await answer.body?.cancel();
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    result.error = (err as Error).name === 'TimeoutError' ? 'timeout' : (cause ?? String(err));
  }
  result.ms = Date.now() - started;
  return result;
}
