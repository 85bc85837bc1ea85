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
 * Behind a load balancer, closing the listener at once races it: until its health check has
 * failed `fall` times it still routes requests here, to a closed port or onto a pooled
 * keep-alive connection that this close has just ended (a reset, or a 502/503 from the balancer
 * for a request it cannot retry). So the close begins with SHUTDOWN_DELAY_MS of serving as
 * usual while `app.drain.draining` is true: GET /api/v1/health answers 503 (the balancer marks
 * the instance down and stops sending), and every answer says Connection: close (the balancer
 * and direct clients drop their persistent connections here and open the next ones elsewhere).
 * Only then does the drain below begin (docs/operations.md, "Rolling restarts").
 *
 * The close steps share one clock, `app.drain`, started when that delay ends: requests in
 * flight get until half the deadline, then their connections are closed; the webhook worker's
 * attempts, the request log's last
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
  /** True from the start of the close, SHUTDOWN_DELAY_MS before `closing` (health answers 503). */
  readonly draining: boolean;
  /** True once the drain began (after SHUTDOWN_DELAY_MS): the listener is closed. */
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
    let draining = false;
    let startedAt: number | null = null;
    app.decorate('drain', {
      get draining() {
        return draining;
      },
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
        // An answer whose headers went out before the close began lacks Connection: close: its
        // connection ends with it all the same.
        if (draining && left === 0) socket.destroySoon();
      });
    });

    app.addHook('preClose', async () => {
      draining = true;
      // The first preClose hook (this plugin is registered first): the server listens and every
      // other part serves on until the delay is over. Elapsed time is the subject of this wait.
      const delay = app.config.shutdownDelayMs;
      if (delay > 0) {
        app.log.info({ delayMs: delay }, 'shutting down: serving on until the delay is over');
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
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
      if (draining) reply.header('connection', 'close');
      done(null, payload);
    });
  },
  { name: 'graceful-close', fastify: '5.x', dependencies: ['config'] },
);
