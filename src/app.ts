/**
 * The application as a Fastify plugin, built in three tiers: the shared infrastructure
 * (INFRASTRUCTURE: configuration, the envelope, the databases, hardening, auth, the services),
 * then the features (FEATURES), then the operations of the OpenAPI document bound to their
 * handlers. The server entry (server.ts) only listens and shuts down.
 */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from './config.ts';
import { loggerOptions, requestLogger } from './lib/logging.ts';
import { readableLoggerOptions } from './lib/readable-log.ts';
import { traceIdOf } from './lib/trace.ts';
import auth from './plugins/auth.ts';
import configPlugin from './plugins/config.ts';
import cors from './plugins/cors.ts';
import database from './plugins/database.ts';
import docs from './system/docs-plugin.ts';
import envelope, { clientErrors, frameworkErrors, newRequestId } from './plugins/envelope.ts';
import gracefulClose from './plugins/graceful-close.ts';
import oauth from './oauth/oauth-plugin.ts';
import openapiDocument from './system/openapi-document.ts';
import { bindOperations } from './plugins/operations.ts';
import portal from './portal/portal-plugin.ts';
import metrics from './plugins/metrics.ts';
import rateLimit from './plugins/rate-limit.ts';
import redis from './plugins/redis.ts';
import replica from './plugins/replica.ts';
import requestLogs from './request-logs/request-logs-plugin.ts';
import partitions from './plugins/partitions.ts';
import searchGate from './listings/search-gate-plugin.ts';
import securityHeaders from './plugins/security-headers.ts';
import services from './services-plugin.ts';
import tracing from './plugins/tracing.ts';
import validation from './plugins/validation.ts';
import web from './web/web-plugin.ts';
import webhooks from './webhooks/webhooks-plugin.ts';
import savedSearchMatcher from './saved-searches/matcher-plugin.ts';
import eventWaits from './events/event-waits-plugin.ts';
import { allHandlers, PENDING_OPERATIONS } from './routes.ts';

interface AppOptions {
  config: Config;
}

/**
 * Shared infrastructure, in the order of their hooks and of what they decorate: the drain's
 * clock first (app.drain serves every close hook, the database's too), then tracing, validation
 * and the envelope; the databases and Redis; metrics (the hardening plugins and the services
 * report to it; off without a token); then, in the order of their onRequest hooks, security
 * headers on HTML pages, CORS (answers preflights), authentication (request.caller, once per
 * request) and rate limits (keyed by what it decided; every response carries RateLimit-*); the
 * composition root (app.services); the partition keeper of the tables partitioned by time.
 */
const INFRASTRUCTURE = [
  gracefulClose,
  tracing,
  validation,
  envelope,
  database,
  replica,
  redis,
  metrics,
  securityHeaders,
  cors,
  auth,
  rateLimit,
  services,
  partitions,
] as const;

/**
 * The features, each registering its own routes, hooks and workers over the services: the
 * search gate (the listListings handler runs its search pages in app.searchGate), the request
 * log's recording, the web session and the OAuth server, the portal, the saved searches'
 * matcher, the webhook worker, the long polls' places, the OpenAPI document and its reference.
 */
const FEATURES = [
  searchGate,
  requestLogs,
  web,
  oauth,
  portal,
  savedSearchMatcher,
  webhooks,
  eventWaits,
  openapiDocument,
  docs,
] as const;

async function app(fastify: FastifyInstance, options: AppOptions): Promise<void> {
  await fastify.register(configPlugin, { config: options.config });
  for (const plugin of INFRASTRUCTURE) await fastify.register(plugin);
  for (const plugin of FEATURES) await fastify.register(plugin);
  // Last: every operation of the document bound to its handler (src/plugins/operations.ts).
  await bindOperations(fastify, allHandlers(fastify), PENDING_OPERATIONS);
}

/** Request bodies beyond 1 MiB are refused with 413 payload_too_large. */
const BODY_LIMIT = 1024 * 1024;

function hasOwnKeys(object: object | undefined): boolean {
  for (const key in object) if (Object.hasOwn(object, key)) return true;
  return false;
}

/** TRUST_PROXY=n: the n proxies nearest to the server are believed (proxy-addr hop semantics). */
const trustHops = (hops: number) => (_address: string, hop: number) => hop < hops;

export function serverOptions(config: Config): FastifyServerOptions {
  return {
    // JSON lines with the request id; secrets redacted (src/lib/logging.ts).
    logger: loggerOptions(config.logLevel),
    genReqId: newRequestId,
    // A request's log lines carry the trace id of its W3C traceparent header, when it has one.
    childLoggerFactory(logger, bindings, options, rawRequest) {
      const traceId = traceIdOf(rawRequest.headers.traceparent);
      // Fastify passes `{}` when a route sets no log options; pino's child takes a much shorter
      // path without options (no formatters rebuilt per request), which shows in a profile.
      return requestLogger(
        logger as Parameters<typeof requestLogger>[0],
        traceId ? { ...bindings, traceId } : bindings,
        hasOwnKeys(options) ? options : undefined,
      );
    },
    bodyLimit: BODY_LIMIT,
    // A path parameter of any length reaches its operation, which answers as documented (a 400
    // naming the parameter, with the RateLimit headers), not the router's catch-all 404 past
    // the default 100 characters. 16 KiB is Node's whole header limit: no request line is longer.
    routerOptions: { maxParamLength: 16_384 },
    // Opening the embedded database and migrating can take several seconds on a busy machine.
    pluginTimeout: 120_000,
    // While shutting down, requests that still arrive on open connections are served (the
    // database is open until the last one ends) and answered with Connection: close.
    return503OnClosing: false,
    // Client IP behind a load balancer (rate limits per IP): TRUST_PROXY.
    trustProxy:
      typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy,
    frameworkErrors,
    // A request Node cannot parse gets the error envelope too (src/plugins/envelope.ts).
    clientErrorHandler: clientErrors,
  };
}

/**
 * Builds a ready-to-listen instance (tests use it with app.inject and never listen).
 * `readableLogsTo`: log for a person at a terminal, to that stream (src/lib/readable-log.ts)
 * instead of JSON lines on stdout.
 */
export async function buildApp(
  config: Config,
  overrides: FastifyServerOptions = {},
  readableLogsTo?: { write(text: string): unknown },
): Promise<FastifyInstance> {
  const fastify = Fastify({
    ...serverOptions(config),
    ...(readableLogsTo ? readableLoggerOptions(config.logLevel, readableLogsTo) : {}),
    ...overrides,
  });
  await fastify.register(fp(app, { name: 'app', fastify: '5.x' }), { config });
  await fastify.ready();
  return fastify;
}
