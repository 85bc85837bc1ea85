/**
 * W3C traceparent (src/lib/trace.ts): the request runs inside its trace context, so the
 * webhook events it records carry its trace id. Its log lines get the id from the server's
 * childLoggerFactory (app.ts), before any hook runs.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { traceContext, traceIdOf } from '../lib/trace.ts';

export default fp(
  async function tracing(app: FastifyInstance) {
    // A callback hook, so the rest of the request (hooks, handler) runs inside run().
    app.addHook('onRequest', (request, _reply, done) => {
      const traceId = traceIdOf(request.headers.traceparent);
      if (traceId === null) return done();
      traceContext.run({ traceId }, done);
    });
  },
  { name: 'tracing', fastify: '5.x' },
);
