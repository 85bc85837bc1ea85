/**
 * The application as a Fastify plugin, built in tiers: configuration and validation,
 * the shared plugins (isolation, envelope, database, auth, services), then the routes
 * bound to the OpenAPI document. The server entry (server.ts) only listens and shuts down.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from './config.ts';
import auth from './plugins/auth.ts';
import configPlugin from './plugins/config.ts';
import database from './plugins/database.ts';
import envelope, { frameworkErrors } from './plugins/envelope.ts';
import isolation from './plugins/isolation.ts';
import oauth from './plugins/oauth.ts';
import { bindOperations } from './plugins/operations.ts';
import services from './plugins/services.ts';
import validation from './plugins/validation.ts';
import web from './plugins/web.ts';
import webhooks from './plugins/webhooks.ts';
import { allHandlers, PENDING_OPERATIONS } from './routes.ts';

export interface AppOptions {
  config: Config;
}

async function app(fastify: FastifyInstance, options: AppOptions): Promise<void> {
  await fastify.register(configPlugin, { config: options.config });
  await fastify.register(validation);
  await fastify.register(isolation);
  await fastify.register(envelope);
  await fastify.register(database);
  await fastify.register(auth);
  await fastify.register(services);
  await fastify.register(web);
  await fastify.register(oauth);
  await fastify.register(webhooks);
  await bindOperations(fastify, allHandlers(fastify), PENDING_OPERATIONS);
}

export default fp(app, { name: 'app', fastify: '5.x' });

/** Request bodies beyond 1 MiB are refused with 413 payload_too_large. */
export const BODY_LIMIT = 1024 * 1024;

export function serverOptions(config: Config): FastifyServerOptions {
  return {
    logger: {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'],
        censor: '[redacted]',
      },
    },
    genReqId: () => `req_${randomUUID().replaceAll('-', '')}`,
    bodyLimit: BODY_LIMIT,
    // Opening the embedded database and migrating can take several seconds on a busy machine.
    pluginTimeout: 120_000,
    return503OnClosing: true,
    frameworkErrors,
  };
}

/** Builds a ready-to-listen instance (tests use it with app.inject and never listen). */
export async function buildApp(config: Config, overrides: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const fastify = Fastify({ ...serverOptions(config), ...overrides });
  await fastify.register(fp(app, { name: 'app', fastify: '5.x' }), { config });
  await fastify.ready();
  return fastify;
}
