/**
 * Shared by the webhook tests: a REAL HTTPS receiver (node:https on 127.0.0.1 with the test
 * certificate of test/fixtures/tls, trusted through NODE_EXTRA_CA_CERTS, docs/webhooks.md) that
 * verifies every delivery with the receivers' helper and with the Standard Webhooks verifiers of
 * the `standardwebhooks` and `svix` packages in their default mode, given the secret without its
 * `svc_` (docs/webhooks.md, "Verifying signatures"), and small waiting helpers.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import {
  verifyServiceSignature,
  verifyWebhook,
  type WebhookEvent,
} from '../../sdk/src/webhooks.ts';
import { sql } from 'drizzle-orm';
import type { Db } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { buildTestApp, type TestLike } from '../helpers/app.ts';

const tls = (name: string) =>
  readFileSync(fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url)));

if (!process.env.NODE_EXTRA_CA_CERTS) {
  throw new Error(
    'NODE_EXTRA_CA_CERTS is not set: run the webhook tests through tap (package.json tap "test-env").',
  );
}

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /**
   * The body as the helper parsed it after verifying both signatures; null if verification failed.
   */
  event: WebhookEvent | null;
  verifyError: string | null;
  status: number;
  /** When the request had arrived (its body read), and when its answer was sent (ms epoch). */
  at: number;
  answeredAt?: number;
}

interface Reply {
  status?: number;
  headers?: Record<string, string>;
  /** Answer after this many ms (to provoke timeouts). */
  delayMs?: number;
}

export interface Receiver {
  port: number;
  url(path?: string, host?: string): string;
  received: Received[];
  /** Secrets by path: deliveries to a path are verified with its secret. */
  secrets: Map<string, string>;
  /** How to answer, per request (default 200). */
  reply: (req: { path: string; event: WebhookEvent | null }) => Reply;
  to(path: string): Received[];
  close(): Promise<void>;
}

/**
 * The secret to give a Standard Webhooks library in its default mode: the one step
 * docs/webhooks.md documents, the secret without its `svc_` (a `whsec_…` of listen's is left as
 * it is). For a secret issued before the current form (`svc_whsec_` + base64url, no `=`), which
 * signs with its UTF-8 bytes until rotated: `whsec_` + base64 of the string, how the docs before
 * this form told receivers to configure those libraries.
 */
export const standardForm = (secret: string) =>
  /^(svc_)?whsec_[A-Za-z0-9+/]{43}=$/.test(secret)
    ? secret.replace(/^svc_/, '')
    : `whsec_${Buffer.from(secret).toString('base64')}`;

export async function startReceiver(t: TestLike): Promise<Receiver> {
  const sockets = new Set<import('node:net').Socket>();
  const receiver: Receiver = {
    port: 0,
    url: (path = '/hook', host = '127.0.0.1') => `https://${host}:${receiver.port}${path}`,
    received: [],
    secrets: new Map(),
    reply: () => ({ status: 200 }),
    to: (path) => receiver.received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer(
    { key: tls('receiver-key.pem'), cert: tls('receiver-cert.pem') },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      // The verifier is async (WebCrypto); everything that can fail below is caught.
      req.on('end', async () => {
        const raw = Buffer.concat(chunks);
        const path = (req.url ?? '/').split('?')[0]!;
        const secret = receiver.secrets.get(path);
        let event: WebhookEvent | null = null;
        let verifyError: string | null = null;
        try {
          if (!secret) throw new Error(`no secret registered for ${path}`);
          event = await verifyWebhook(secret, raw, req.headers);
          const legacy = await verifyServiceSignature(
            secret,
            raw,
            req.headers['x-service-signature'] as string | undefined,
          );
          if (legacy.id !== event.id) throw new Error('the two verifications disagree');
          const headers = req.headers as Record<string, string>;
          new StandardWebhook(standardForm(secret)).verify(raw.toString('utf8'), headers);
          new SvixWebhook(standardForm(secret)).verify(raw.toString('utf8'), headers);
        } catch (err) {
          event = null;
          verifyError = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        }
        const answer = receiver.reply({ path, event });
        const status = answer.status ?? 200;
        const entry: Received = {
          path,
          headers: req.headers,
          raw,
          event,
          verifyError,
          status,
          at: Date.now(),
        };
        receiver.received.push(entry);
        const send = () => {
          if (res.destroyed) return;
          res.writeHead(status, answer.headers ?? {});
          res.end('ok');
          entry.answeredAt = Date.now();
        };
        // Time is the subject: a slow receiver (reply's delayMs).
        if (answer.delayMs) setTimeout(send, answer.delayMs).unref();
        else send();
      });
    },
  );
  server.on('secureConnection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  t.teardown(() => receiver.close());
  return receiver;
}

/**
 * An app for webhook tests: private networks allowed (the receiver is on 127.0.0.1), no rate limit
 * in the way.
 */
export function webhooksApp(
  t: TestLike,
  env: Record<string, string> = {},
): Promise<FastifyInstance> {
  return buildTestApp(t, {
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    RATE_LIMIT_MAX: '1000000',
    ...env,
  });
}

/** Creates an endpoint through the service and registers its secret with the receiver. */
export async function createEndpoint(
  app: FastifyInstance,
  receiver: Receiver,
  input: { appId: string; env?: 'sandbox' | 'live'; path: string },
): Promise<{ id: string; secret: string; url: string }> {
  const created = await app.services.endpoints.create({
    appId: input.appId,
    env: input.env ?? 'sandbox',
    url: receiver.url(input.path),
  });
  receiver.secrets.set(input.path, created.secret);
  return created;
}

/** `count` sandbox endpoints of the app, written directly (nothing is sent to them). */
export function plainEndpoints(db: Db, appId: string, count: number): Promise<{ id: string }[]> {
  return queryRows<{ id: string }>(
    db,
    sql`insert into webhook_endpoints (app_id, environment, url, secret)
        select ${appId}::uuid, 'sandbox', 'https://hooks.example.com/' || i, 'svc_whsec_test'
        from generate_series(1, ${count}::int) as i
        returning id`,
  );
}

/**
 * A burst in the outbox, written directly: `events` listing.created events of the app, a
 * millisecond apart, and a delivery of each to every endpoint of the app, all pending and due.
 */
export async function outboxBurst(db: Db, appId: string, events: number): Promise<void> {
  await db.execute(sql`
    insert into webhook_events (id, app_id, environment, type, data, created_at)
    select md5(i::text), ${appId}::uuid, 'sandbox', 'listing.created', '{"listing":{}}',
           now() - (${events}::int - i) * interval '1 millisecond'
    from generate_series(1, ${events}::int) as i`);
  await db.execute(sql`
    insert into webhook_deliveries (id, event_id, endpoint_id, next_attempt_at, event_created_at)
    select md5(e.id || ep.id::text), e.id, ep.id, e.created_at, e.created_at
    from webhook_events e cross join webhook_endpoints ep
    where e.app_id = ${appId}::uuid and ep.app_id = ${appId}::uuid`);
}

/** A parsed JSON answer; fields are probed freely by the tests. */
export type Json = any;

/** One API call through app.inject with a Bearer key and a JSON body. */
export async function api(
  app: FastifyInstance,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  key: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json }> {
  const res = await app.inject({
    method,
    url,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : null };
}
