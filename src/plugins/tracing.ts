/**
 * The request's scope (src/lib/request-scope.ts): every request runs inside one, which holds its
 * W3C trace id (src/lib/trace.ts), so the webhook events it records carry it, and the time its
 * statements have waited for the database (src/db/pool-gate.ts), and what waits for its answer
 * (afterAnswer: the background loops' wake-ups, src/lib/wake-ups.ts). Its log lines get the
 * trace id from the server's childLoggerFactory (app.ts), before any hook runs.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { answered, runInRequestScope, type RequestScope } from '../lib/request-scope.ts';
import { traceIdOf } from '../lib/trace.ts';

export default fp(
  async function tracing(app: FastifyInstance) {
    // A callback hook, so the rest of the request (hooks, handler) runs inside the scope.
    const scopes = new WeakMap<object, RequestScope>();
    app.addHook('onRequest', (request, _reply, done) => {
      scopes.set(request, runInRequestScope(traceIdOf(request.headers.traceparent), done));
    });
    // Sent: the request's transactions are over, so what its writes woke may look now.
    app.addHook('onResponse', (request, _reply, done) => {
      const scope = scopes.get(request);
      if (scope) answered(scope);
      done();
    });
  },
  { name: 'tracing', fastify: '5.x' },
);
