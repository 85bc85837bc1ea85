/**
 * One HTTP attempt of a delivery (docs/webhooks.md, "Deliveries"): POST to an https URL whose host
 * was just checked (ssrf.ts) and pinned to the checked address, within WEBHOOK_TIMEOUT_MS, never
 * following redirects. Any 2xx is success; 410 disables the endpoint; anything else (another
 * status, a redirect, a timeout, a refused or failed connection, a TLS error) is a failure.
 *
 * Connections are reused (keep-alive) through an AgentPool: one agent per endpoint, host name,
 * checked address and port, so a pooled socket only ever goes to an address the SSRF check
 * approved for that host (a new DNS answer gets a new agent), and endpoints that share a host do
 * not share (or queue for) each other's sockets.
 */
import { Agent, request } from 'node:https';
import {
  checkDestination,
  parseWebhookUrl,
  pinnedLookup,
  UnsafeDestinationError,
  type CheckedAddress,
  type DestinationOptions,
} from './ssrf.ts';

export type AttemptResult =
  | { kind: 'success'; responseCode: number; error: null }
  | { kind: 'gone'; responseCode: 410; error: string }
  | {
      kind: 'failure';
      responseCode: number | null;
      error: string;
      /** For the operator's log only: why a destination was refused (never stored). */
      detail?: string;
    };

export interface SendOptions extends DestinationOptions {
  timeoutMs: number;
  /** Keep-alive agents; without one, every attempt opens a fresh connection. */
  agents?: AgentPool | undefined;
  /** Whose sockets these are (the endpoint id): each endpoint has its own. */
  agentKey?: string;
  /** Aborted when the process shuts down: the attempt ends at once as a failure. */
  signal?: AbortSignal | undefined;
}

/** Agents kept at most; the least recently used one is closed beyond that. */
const MAX_AGENTS = 512;

/**
 * Keep-alive HTTPS agents, one per (endpoint, host name, checked address, port), least recently
 * used first out. Idle sockets close after `idleMs`.
 */
export class AgentPool {
  private readonly agents = new Map<string, Agent>();

  constructor(
    private readonly options: { idleSocketsPerAgent: number; idleMs?: number } = {
      idleSocketsPerAgent: 4,
    },
  ) {}

  get(owner: string, checked: CheckedAddress, port: number): Agent {
    const key = `${owner}|${checked.hostname}|${checked.address}|${port}`;
    let agent = this.agents.get(key);
    if (agent) this.agents.delete(key);
    else {
      agent = new Agent({
        keepAlive: true,
        // The worker caps attempts per endpoint; the agent never queues one behind a socket
        // that is still being released (a queued attempt's timeout would already be running).
        maxSockets: Infinity,
        maxFreeSockets: this.options.idleSocketsPerAgent,
        timeout: this.options.idleMs ?? 30_000,
        scheduling: 'lifo',
      });
      if (this.agents.size >= MAX_AGENTS) {
        const [oldest] = this.agents;
        if (oldest) {
          this.agents.delete(oldest[0]);
          oldest[1].destroy();
        }
      }
    }
    this.agents.set(key, agent);
    return agent;
  }

  /** Closes every pooled connection. */
  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** Bytes of a response body read (and discarded) before the connection is dropped. */
const MAX_RESPONSE_BYTES = 64 * 1024;

const failure = (
  error: string,
  responseCode: number | null = null,
  detail?: string,
): AttemptResult => ({
  kind: 'failure',
  responseCode,
  error: error.slice(0, 500),
  ...(detail === undefined ? {} : { detail }),
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
    if (err instanceof UnsafeDestinationError)
      return failure(`refused: ${err.message}`, null, err.detail);
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
    const port = Number(url.port || 443);
    const req = request(
      {
        protocol: 'https:',
        hostname: checked.hostname,
        port,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: pinnedLookup(checked),
        // A pooled socket of this host's agent for the checked address, or a fresh connection.
        agent: options.agents ? options.agents.get(options.agentKey ?? '', checked, port) : false,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > MAX_RESPONSE_BYTES) res.destroy();
        });
        res.on('error', () => {});
        if (status >= 200 && status < 300)
          answer = { kind: 'success', responseCode: status, error: null };
        else if (status === 410)
          answer = { kind: 'gone', responseCode: 410, error: 'HTTP 410 Gone: endpoint disabled' };
        else if (status >= 300 && status < 400) {
          const location = res.headers.location;
          answer = failure(
            `redirect (HTTP ${status}${location ? ` to ${location}` : ''}) not followed`,
            status,
          );
        } else answer = failure(`HTTP ${status}`, status);
        // Settled once the answer is read to its end: by then a kept-alive socket is back in its
        // agent, so the endpoint's next attempt reuses it instead of opening another.
        res.on('close', () => {
          clearTimeout(timer);
          if (!res.complete) req.destroy();
          settle(answer!);
        });
      },
    );
    /** The answer, from its status line on. */
    let answer: AttemptResult | undefined;
    // The deadline covers the answer's status line; a body still streaming then is cut off (the
    // status counts).
    const timer = setTimeout(() => {
      settle(answer ?? failure(`timeout after ${options.timeoutMs} ms`));
      req.destroy();
    }, remaining);
    timer.unref();
    const abort = () => {
      clearTimeout(timer);
      settle(failure(`cut short after ${Date.now() - started} ms: the server shut down`));
      req.destroy();
    };
    if (options.signal?.aborted) abort();
    else options.signal?.addEventListener('abort', abort, { once: true });
    req.on('close', () => options.signal?.removeEventListener('abort', abort));
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      settle(failure(`connection error: ${err.code ? `${err.code} ` : ''}${err.message}`));
    });
    req.end(body);
  });
}
