/**
 * Graceful shutdown, the app's side (the signals are handled in src/server.ts). When the app
 * starts closing, Fastify stops accepting connections and closes the idle ones, but a keep-alive
 * connection that is busy at that moment would stay open after its answer until the keep-alive
 * timeout, holding the process up. Every answer sent while closing says Connection: close, so
 * each connection ends with its last in-flight request and the drain finishes as soon as they
 * are answered. (Requests that still arrive on such a connection are served normally:
 * return503OnClosing is off in src/app.ts, and the database stays open until the last one ends.)
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

export default fp(
  async function gracefulClose(app: FastifyInstance) {
    let closing = false;
    app.addHook('preClose', async () => {
      closing = true;
    });
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (closing) reply.header('connection', 'close');
      done(null, payload);
    });
  },
  { name: 'graceful-close', fastify: '5.x' },
);
