/**
 * Graceful shutdown, the app's side (the signals are handled in src/server.ts), bounded by
 * SHUTDOWN_TIMEOUT_MS whatever is in flight (docs/operations.md, graceful shutdown).
 *
 * When the app starts closing (preClose), Fastify stops accepting connections and Node closes
 * the connections it counts as idle. This plugin closes every other connection that has no
 * request in flight: Node does not count a connection as idle while it has sent nothing yet or
 * only part of a request's headers, and such a connection (a browser opens spare ones ahead of
 * need) held server.close(), and the whole drain, until the deadline or Node's 75 s
 * headersTimeout. Every answer sent while closing says Connection: close, and its connection
 * ends with it. (Requests that still arrive on an open connection are served normally:
 * return503OnClosing is off in src/app.ts, and the database stays open until the last one ends.)
 *
 * The close steps share one clock, `app.drain`: requests in flight get until half the deadline,
 * then their connections are closed; the webhook worker's attempts, the request log's last
 * write and the database pools' end each have a later share (their plugins), so the app has
 * closed before src/server.ts's exit-anyway timer fires.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Socket } from 'node:net';
import { DRAIN_SHARES } from '../lib/drain.ts';

/** A connection accepted after the close began is closed if it sends no request in this time. */
const LATE_CONNECTION_MS = 1000;

interface DrainClock {
  /** True once the app started closing. */
  readonly closing: boolean;
  /** Milliseconds left until `share` of SHUTDOWN_TIMEOUT_MS since the close started (>= 0). */
  left(share: number): number;
}

declare module 'fastify' {
  interface FastifyInstance {
    drain: DrainClock;
  }
}

export default fp(
  async function gracefulClose(app: FastifyInstance) {
    const deadlineMs = app.config.shutdownTimeoutMs;
    let startedAt: number | null = null;
    app.decorate('drain', {
      get closing() {
        return startedAt !== null;
      },
      left(share: number) {
        if (startedAt === null) return Math.round(deadlineMs * share);
        return Math.max(0, Math.round(startedAt + deadlineMs * share - Date.now()));
      },
    });

    // Requests in flight per connection (a client may pipeline several).
    const sockets = new Set<Socket>();
    const inFlight = new WeakMap<Socket, number>();
    const server = app.server;
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      // Accepted while the close began (before the server stopped listening): a request that
      // comes at once is served, a connection silent for a second is closed.
      if (startedAt !== null)
        setTimeout(() => inFlight.get(socket) || socket.destroy(), LATE_CONNECTION_MS).unref();
    });
    server.on('request', (request, response) => {
      const socket = request.socket;
      inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
      response.once('close', () => {
        const left = (inFlight.get(socket) ?? 1) - 1;
        inFlight.set(socket, left);
        // An answer whose headers went out before the close began lacks Connection: close.
        if (startedAt !== null && left === 0) socket.destroySoon();
      });
    });

    app.addHook('preClose', async () => {
      startedAt = Date.now();
      for (const socket of sockets) if (!inFlight.get(socket)) socket.destroy();
      const busy = sockets.size;
      if (busy === 0) return;
      const cut = setTimeout(() => {
        const requests = [...sockets].reduce((n, s) => n + (inFlight.get(s) ?? 0), 0);
        app.log.warn(
          { requests, connections: sockets.size, afterMs: Date.now() - startedAt! },
          'shutting down: requests still in flight at their share of the deadline are cut short',
        );
        server.closeAllConnections();
      }, app.drain.left(DRAIN_SHARES.requests));
      cut.unref();
      server.once('close', () => clearTimeout(cut));
    });
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (startedAt !== null) reply.header('connection', 'close');
      done(null, payload);
    });
  },
  { name: 'graceful-close', fastify: '5.x', dependencies: ['config'] },
);
