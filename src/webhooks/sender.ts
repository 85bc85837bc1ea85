/**
 * One HTTP attempt of a delivery (docs/webhooks.md, "Deliveries"): POST to an https URL whose host
 * was just checked (ssrf.ts) and pinned to the checked address, within WEBHOOK_TIMEOUT_MS, never
 * following redirects. Any 2xx is success; 410 disables the endpoint; anything else (another
 * status, a redirect, a timeout, a refused or failed connection, a TLS error) is a failure.
 */
import { request } from 'node:https';
import {
  checkDestination,
  parseWebhookUrl,
  pinnedLookup,
  UnsafeDestinationError,
  type DestinationOptions,
} from './ssrf.ts';

export type AttemptResult =
  | { kind: 'success'; responseCode: number; error: null }
  | { kind: 'gone'; responseCode: 410; error: string }
  | { kind: 'failure'; responseCode: number | null; error: string };

export interface SendOptions extends DestinationOptions {
  timeoutMs: number;
}

/** Bytes of a response body read (and discarded) before the connection is dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

const failure = (error: string, responseCode: number | null = null): AttemptResult => ({
  kind: 'failure',
  responseCode,
  error: error.slice(0, 500),
});

/** How an attempt ended, in the few words an operator's dashboard counts by. */
export type AttemptOutcome =
  '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'connection_error' | 'refused' | 'error';

export function attemptOutcome(result: AttemptResult): AttemptOutcome {
  const code = result.responseCode;
  if (code !== null) {
    if (code >= 200 && code < 300) return '2xx';
    if (code >= 300 && code < 400) return '3xx';
    if (code >= 400 && code < 500) return '4xx';
    return '5xx';
  }
  if (result.error?.startsWith('refused:')) return 'refused';
  if (result.error?.startsWith('timeout')) return 'timeout';
  if (result.error?.startsWith('connection error')) return 'connection_error';
  return 'error';
}

export async function sendWebhook(
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  options: SendOptions,
): Promise<AttemptResult> {
  const started = Date.now();
  let url: URL;
  let checked;
  try {
    url = parseWebhookUrl(rawUrl);
    checked = await checkDestination(url, options);
  } catch (err) {
    if (err instanceof UnsafeDestinationError) return failure(`refused: ${err.message}`);
    throw err;
  }
  const remaining = options.timeoutMs - (Date.now() - started);
  if (remaining <= 0)
    return failure(`timeout after ${options.timeoutMs} ms (resolving ${checked.hostname})`);

  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const settle = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    const req = request(
      {
        protocol: 'https:',
        hostname: checked.hostname,
        port: url.port || 443,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: pinnedLookup(checked),
        // A fresh connection per attempt: no pooled socket to an address checked earlier.
        agent: false,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > MAX_RESPONSE_BYTES) res.destroy();
        });
        res.on('error', () => {});
        res.on('close', () => {
          clearTimeout(timer);
          req.destroy();
        });
        if (status >= 200 && status < 300)
          settle({ kind: 'success', responseCode: status, error: null });
        else if (status === 410)
          settle({ kind: 'gone', responseCode: 410, error: 'HTTP 410 Gone: endpoint disabled' });
        else if (status >= 300 && status < 400) {
          const location = res.headers.location;
          settle(
            failure(
              `redirect (HTTP ${status}${location ? ` to ${location}` : ''}) not followed`,
              status,
            ),
          );
        } else settle(failure(`HTTP ${status}`, status));
      },
    );
    // The deadline covers the answer's status line; a body still streaming then is cut off too.
    const timer = setTimeout(() => {
      settle(failure(`timeout after ${options.timeoutMs} ms`));
      req.destroy();
    }, remaining);
    timer.unref();
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      settle(failure(`connection error: ${err.code ? `${err.code} ` : ''}${err.message}`));
    });
    req.end(body);
  });
}
