/**
 * The request log (docs/portal.md, request logs): every /api/v1 request whose credential
 * belongs to an app (an API key or an OAuth access token) is recorded when its response has
 * gone, into a bounded buffer written in batches (src/request-logs/request-log-buffer.ts): time,
 * method, path with the query's secret-looking values redacted, status, the error sent, latency,
 * request id, the key or the token's user, the rate-limit state, and the request's and the
 * response's JSON bodies, their first 8 KB redacted (src/request-logs/logged-body.ts). Never a
 * header or a credential. Each batch also adds to the usage rollup (src/request-logs/usage.ts)
 * in the same statement (in a second one on the primary when REQUEST_LOG_DATABASE_URL puts the
 * log on a database of its own). The log's days are dropped by src/plugins/partitions.ts, the
 * rollup's hours deleted hourly. REQUEST_LOGS=false turns both off.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { redactText } from '../lib/redact.ts';
import { uuidV7 } from '../lib/uuid-v7.ts';
import { isJsonType, loggedBody, type LoggedBody } from './logged-body.ts';
import { loggedPath } from './logged-path.ts';
import type { RequestLogBuffer } from './request-log-buffer.ts';
import { sentError } from '../lib/sent-errors.ts';
import { DRAIN_SHARES, within } from '../lib/drain.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Null when REQUEST_LOGS=false. */
    requestLog: RequestLogBuffer | null;
  }
}

const API_PREFIX = '/api/v1/';

/** Whether a request is written to its app's log: made with an app's credential, to the API. */
const isLogged = (request: FastifyRequest) =>
  request.caller?.appId !== undefined && request.url.startsWith(API_PREFIX);

/** The body's columns of an entry. */
function bodyColumns(prefix: 'request' | 'response', body: LoggedBody | null) {
  return {
    [`${prefix}_body`]: body?.text ?? null,
    [`${prefix}_body_size`]: body?.size ?? null,
  } as Record<`${typeof prefix}_body`, string | null> &
    Record<`${typeof prefix}_body_size`, number | null>;
}

function rateLimitOf(reply: FastifyReply): string | null {
  const limit = reply.getHeader('ratelimit-limit');
  if (limit === undefined) return null;
  return JSON.stringify({
    limit: Number(limit),
    remaining: Number(reply.getHeader('ratelimit-remaining')),
    reset: Number(reply.getHeader('ratelimit-reset')),
  });
}

export default fp(
  async function requestLogs(app: FastifyInstance) {
    const { config } = app;
    if (!config.requestLogs) {
      app.decorate('requestLog', null);
      return;
    }
    const logs = app.services.requestLogs;
    const buffer = logs.buffer({
      capacity: config.requestLogBuffer,
      // Short: entries that waited 250 ms outlived the young generation and grew old space by a
      // few MB under load (docs/performance.md, with the request log on).
      flushIntervalMs: 50,
      batchSize: 500,
      log: app.log.child({ component: 'request-log' }),
      onDrop: app.metrics ? (count) => app.metrics?.requestLogDropped(count) : undefined,
    });
    app.decorate('requestLog', buffer);

    // The bodies' texts as they came and went, until the response has gone: they are cut and
    // redacted then, off the response's path.
    const requestBodies = new WeakMap<FastifyRequest, string>();
    const responseBodies = new WeakMap<FastifyRequest, string>();
    // Fastify's own JSON parser (its defaults: prototype poisoning refused), given the text
    // first so that the log can keep it. A body that does not parse is not kept.
    const parseJson = app.getDefaultJsonParser('error', 'error');
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      parseJson.call(app, request, body as string, (err, value) => {
        if (!err && isLogged(request)) requestBodies.set(request, body as string);
        done(err, value);
      });
    });
    app.addHook('onSend', (request, reply, payload, done) => {
      if (
        typeof payload === 'string' &&
        isLogged(request) &&
        isJsonType(reply.getHeader('content-type') as string | undefined)
      )
        responseBodies.set(request, payload);
      done(null, payload);
    });

    app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
      const caller = request.caller;
      if (caller?.appId && isLogged(request)) {
        const error = sentError(request);
        const latency = reply.elapsedTime;
        const at = Math.floor(Date.now() - latency);
        buffer.record({
          id: uuidV7(at),
          app_id: caller.appId,
          environment: caller.environment,
          created_at: new Date(at).toISOString(),
          method: request.method,
          path: loggedPath(request.url),
          status: reply.statusCode,
          error_code: error?.code ?? null,
          // An error can quote what the client sent (an unknown field's name, say).
          error_message: error ? redactText(error.message) : null,
          error_details: error?.details ? redactText(JSON.stringify(error.details)) : null,
          latency_ms: Math.round(latency),
          request_id: request.id,
          key_id: caller.kind === 'api_key' ? caller.credentialId : null,
          user_id: caller.kind === 'oauth' ? caller.userId : null,
          rate_limit: rateLimitOf(reply),
          ...bodyColumns('request', loggedBody(requestBodies.get(request) ?? '')),
          ...bodyColumns('response', loggedBody(responseBodies.get(request) ?? '')),
        });
      }
      done();
    });

    // Retention (14 days) is the service's; this process runs it while it serves.
    let stopPruning: (() => void) | null = null;
    app.addHook('onReady', async () => {
      stopPruning = logs.keepPruning((err) =>
        app.log.warn({ err }, 'request log retention: delete failed; next hour tries again'),
      );
    });
    // Runs once the requests are answered (their entries are in the buffer); bounded by its
    // share of SHUTDOWN_TIMEOUT_MS: entries not written by then are lost, and said so.
    app.addHook('onClose', async () => {
      stopPruning?.();
      const waiting = buffer.size;
      if ((await within(buffer.close(), app.drain.left(DRAIN_SHARES.requestLog))) === 'cut')
        app.log.warn(
          { entries: waiting },
          'shutting down: request log entries not written in time',
        );
    });
  },
  {
    name: 'request-logs',
    fastify: '5.x',
    dependencies: ['config', 'graceful-close', 'database', 'envelope', 'services'],
  },
);
