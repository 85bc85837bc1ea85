#!/usr/bin/env node
/**
 * The SDK's command (Node.js only; the library stays free of Node modules):
 *
 *   MARKETPLACE_KEY=svc_sandbox_… npx marketplace-listings-sdk listen \
 *     --forward-to http://localhost:4000/hooks
 *
 * Forwards the app's events to a local URL as signed deliveries (./listen.ts). The credential
 * comes from the environment (MARKETPLACE_KEY: an API key or an OAuth access token), never from
 * an argument (arguments land in shell history and process lists); the API's host from
 * MARKETPLACE_URL or --api-url, https unless it is this machine (or --allow-insecure-http). The
 * signing secret, for the same reason never an argument: the file --secret-file names, else
 * MARKETPLACE_LISTEN_SECRET, else one kept for this machine in
 * $XDG_CONFIG_HOME/marketplace-listings-sdk/listen-secret (~/.config/…), made on first use and
 * printed at start. One line per forward; Ctrl-C stops it.
 *
 *   MARKETPLACE_KEY=svc_sandbox_… npx marketplace-listings-sdk trigger listing.created
 *
 * Sends a sandbox test event of that type (POST /api/v1/events/test) with the same key and API
 * host: `listen` hears it, and the app's endpoints that enabled the type receive it.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { apiKeyAuth, oauthTokenAuth } from './auth.js';
import { createMarketplaceClient } from './client.js';
import { isMarketplaceApiError } from './errors.js';
import {
  apiBaseUrl,
  isLoopbackUrl,
  listen,
  ListenError,
  newListenSecret,
  type Forward,
} from './listen.js';
import type { EventType } from './types.js';

/** The types `trigger` sends (the document's TestEventCreate). */
const TEST_EVENT_TYPES = [
  'listing.created',
  'listing.updated',
  'listing.archived',
  'listing.matched',
] as const satisfies readonly EventType[];

const TRIGGER_USAGE = `Usage: marketplace-listings-sdk trigger TYPE [options]

Sends a sandbox test event of TYPE (${TEST_EVENT_TYPES.join(', ')}),
marked data.test: true, to your app's sandbox endpoints that enabled TYPE; listen hears it too.

Environment:
  MARKETPLACE_KEY            a sandbox API key with webhooks:write (svc_sandbox_…) (required)
  MARKETPLACE_URL            the API's host (default http://127.0.0.1:3000)

Options:
  --endpoint ID          only this webhook endpoint (it must have enabled TYPE)
  --api-url URL          the API's host (instead of MARKETPLACE_URL)
  --allow-insecure-http  allow a plain-http API URL to a host that is not this machine
  -h, --help             this text`;

const USAGE = `Usage: marketplace-listings-sdk listen --forward-to URL [options]
       marketplace-listings-sdk trigger TYPE [options]   (trigger --help)

Forwards your app's events (GET /api/v1/events, long polling) to URL as signed webhook
deliveries, so a receiver on this machine gets them without a public URL.

Environment:
  MARKETPLACE_KEY            the API key (svc_sandbox_… or svc_live_…) or OAuth access token
                             (required)
  MARKETPLACE_URL            the API's host (default http://127.0.0.1:3000)
  MARKETPLACE_LISTEN_SECRET  sign with this secret instead of this machine's (whsec_…)

Options:
  --forward-to URL       where each event is POSTed (loopback hosts only unless --allow-remote)
  --events LIST          only these types, comma-separated (listing.created,listing.updated,...)
  --since TIME           start after this ISO 8601 instant instead of now (last 30 days)
  --secret-file FILE     sign with the secret in FILE instead of this machine's
  --api-url URL          the API's host (instead of MARKETPLACE_URL)
  --allow-remote         allow a --forward-to host that is not this machine
  --allow-insecure-http  allow a plain-http API URL to a host that is not this machine
  -h, --help             this text`;

/** A mistake in how the command was run: its message is printed, the exit code is 2. */
class UsageError extends Error {}

/** The signing secret the user chose, and where from (never from an argument). */
function chosenSecret(file: string | undefined): { secret: string; from: string } | null {
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`Cannot read --secret-file ${file}: ${(err as Error).message}`);
    }
    const secret = text.trim();
    if (!secret) throw new UsageError(`--secret-file ${file} is empty.`);
    return { secret, from: `--secret-file ${file}` };
  }
  const secret = process.env.MARKETPLACE_LISTEN_SECRET?.trim();
  return secret ? { secret, from: 'MARKETPLACE_LISTEN_SECRET' } : null;
}

/** This machine's secret: made once, kept readable by its user only. */
function machineSecret(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(homedir(), '.config');
  const file = path.join(base, 'marketplace-listings-sdk', 'listen-secret');
  try {
    const kept = readFileSync(file, 'utf8').trim();
    // One kept by an earlier build (base64url, which Standard Webhooks libraries refuse): replaced.
    if (/^whsec_[A-Za-z0-9+/]{43}=$/.test(kept)) return kept;
  } catch {
    // none yet
  }
  const secret = newListenSecret();
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return secret;
}

function line(forward: Forward): string {
  const outcome = forward.status === null ? `error (${forward.error})` : String(forward.status);
  return `${new Date().toISOString()}  ${forward.eventId}  ${forward.type.padEnd(16)}  -> ${outcome}  ${forward.ms} ms`;
}

const parse = (args: string[]) =>
  parseArgs({
    args,
    allowPositionals: true,
    options: {
      'forward-to': { type: 'string' },
      events: { type: 'string' },
      since: { type: 'string' },
      // Recognized only to be refused without echoing it (see main).
      secret: { type: 'string' },
      'secret-file': { type: 'string' },
      'api-url': { type: 'string' },
      'allow-remote': { type: 'boolean' },
      'allow-insecure-http': { type: 'boolean' },
      endpoint: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parse(argv);
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (positionals[0] === 'trigger') return trigger(values, positionals.slice(1));
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals[0] !== 'listen' || positionals.length > 1 || !values['forward-to']) {
    console.error(USAGE);
    return 2;
  }
  if (values.secret !== undefined) {
    console.error(
      '--secret is not accepted: arguments land in shell history and process lists. Put the ' +
        'secret in MARKETPLACE_LISTEN_SECRET or in a file (--secret-file FILE).',
    );
    return 2;
  }
  let chosen;
  try {
    chosen = chosenSecret(values['secret-file']);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(err.message);
    return 2;
  }
  const credential = process.env.MARKETPLACE_KEY?.trim();
  if (!credential) {
    console.error(
      'Set MARKETPLACE_KEY to an API key of the app (svc_sandbox_… or svc_live_…) or an OAuth access token.',
    );
    return 2;
  }
  const auth = credential.startsWith('svc_oauth_')
    ? oauthTokenAuth(credential)
    : apiKeyAuth(credential);
  const baseUrl = values['api-url'] ?? process.env.MARKETPLACE_URL ?? 'http://127.0.0.1:3000';
  const secret = chosen?.secret ?? machineSecret();
  const forwardTo = values['forward-to'];
  const events = values.events
    ?.split(',')
    .map((type) => type.trim())
    .filter(Boolean) as EventType[] | undefined;

  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await listen({
      baseUrl,
      auth,
      forwardTo,
      secret,
      ...(events ? { events } : {}),
      ...(values.since ? { since: values.since } : {}),
      allowRemote: values['allow-remote'] ?? false,
      allowInsecureHttp: values['allow-insecure-http'] ?? false,
      signal: stop.signal,
      onReady: () => {
        const where = isLoopbackUrl(forwardTo)
          ? 'loopback only (--allow-remote for other hosts)'
          : 'a host that is not this machine (--allow-remote)';
        console.log(`Ready. Forwarding the events of ${baseUrl} to ${forwardTo}: ${where}.`);
        console.log(
          chosen
            ? `Signing secret: the one in ${chosen.from} (not shown; verify with it)`
            : `Signing secret: ${secret} (verify with it as your endpoint's secret)`,
        );
        if (events) console.log(`Only: ${events.join(', ')}`);
        console.log('Ctrl-C to stop.');
      },
      onForward: (forward) => console.log(line(forward)),
      onRetry: (err, delayMs) =>
        console.error(
          `${new Date().toISOString()}  polling failed (${(err as Error).message}); again in ${delayMs} ms`,
        ),
    });
  } catch (err) {
    if (err instanceof ListenError) {
      console.error(err.message);
      return 2;
    }
    if (isMarketplaceApiError(err)) {
      console.error(`The API refused: ${err.status} ${err.code}: ${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  console.log('Stopped.');
  return 0;
}

/** `trigger TYPE`: one test event through POST /api/v1/events/test, its id and deliveries shown. */
async function trigger(
  values: ReturnType<typeof parse>['values'],
  positionals: string[],
): Promise<number> {
  if (values.help) {
    console.log(TRIGGER_USAGE);
    return 0;
  }
  const type = positionals[0];
  if (type === undefined || positionals.length > 1) {
    console.error(TRIGGER_USAGE);
    return 2;
  }
  if (!(TEST_EVENT_TYPES as readonly string[]).includes(type)) {
    console.error(`Unknown event type ${type}: choose one of ${TEST_EVENT_TYPES.join(', ')}.`);
    return 2;
  }
  const credential = process.env.MARKETPLACE_KEY?.trim();
  if (!credential) {
    console.error('Set MARKETPLACE_KEY to a sandbox API key of the app (svc_sandbox_…).');
    return 2;
  }
  if (!credential.startsWith('svc_sandbox_')) {
    const what = credential.startsWith('svc_live_')
      ? 'a live key (svc_live_…)'
      : credential.startsWith('svc_oauth_')
        ? 'an OAuth access token'
        : 'not a sandbox API key';
    console.error(
      `MARKETPLACE_KEY is ${what}: test events are sandbox only. Use a sandbox API key with ` +
        'webhooks:write (svc_sandbox_…).',
    );
    return 2;
  }
  let baseUrl: string;
  let auth;
  try {
    auth = apiKeyAuth(credential);
    baseUrl = apiBaseUrl(
      values['api-url'] ?? process.env.MARKETPLACE_URL ?? 'http://127.0.0.1:3000',
      values['allow-insecure-http'] ?? false,
    );
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  const api = createMarketplaceClient({ baseUrl, auth });
  try {
    const { data } = await api.events.sendTest({
      type: type as (typeof TEST_EVENT_TYPES)[number],
      ...(values.endpoint !== undefined ? { endpoint_id: values.endpoint } : {}),
    });
    const to = data.deliveries === 1 ? '1 endpoint' : `${data.deliveries} endpoints`;
    console.log(`Sent ${data.event.type} test event ${data.event.event_id} to ${to}.`);
    if (data.deliveries === 0)
      console.log(`No sandbox endpoint of the app enabled ${type}; listen hears it all the same.`);
    return 0;
  } catch (err) {
    if (isMarketplaceApiError(err)) {
      console.error(`The API refused: ${err.status} ${err.code}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

// Exits when done: fetch keeps idle keep-alive connections to the API open (until the server
// closes them), which would hold the process up after Ctrl-C.
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
