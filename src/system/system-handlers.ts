import type { FastifyInstance } from 'fastify';
import { ServiceUnavailableError } from '../errors.ts';
import type { Handlers } from '../lib/handlers.ts';

export function systemHandlers(app: FastifyInstance): Handlers {
  // The document is @fastify/swagger's (openapi-document.ts); its JSON text is made on the first
  // request and kept, as the plugin keeps its YAML.
  let json: string | undefined;
  return {
    // The OpenAPI getHealth operation: the database is not_checked unless ?db=1 (db, deprecated:
    // null); a failed check answers 503, and
    // so does a server that is shutting down (its load balancer's check takes it out of
    // rotation while it still serves: src/plugins/graceful-close.ts).
    getHealth: async (request) => {
      if (app.drain.draining)
        throw new ServiceUnavailableError('The server is shutting down.', undefined, {
          'retry-after': '1',
        });
      const db = request.query.db === '1' ? await app.database.ping() : null;
      if (db === false) throw new ServiceUnavailableError('The database is not reachable.');
      const configured = app.config.sessionSecretConfigured;
      return {
        data: {
          ok: true,
          database: db ? 'ok' : 'not_checked',
          session_secret: configured ? 'configured' : 'generated',
          db,
          config_ready: configured,
        },
        meta: request.meta(),
      };
    },
    // Sent as text: a string payload skips the response serializer, so the document goes out
    // whole (the schema only describes its top level).
    getOpenApiJson: async (_request, reply) =>
      reply
        .type('application/json; charset=utf-8')
        .send((json ??= JSON.stringify(app.swagger())) as never),
    getOpenApiYaml: async (_request, reply) =>
      reply.type('application/yaml; charset=utf-8').send(app.swagger({ yaml: true }) as never),
  };
}
