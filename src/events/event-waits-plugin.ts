/**
 * Long polling's wake-ups (GET /api/v1/events?wait=, src/events/event-waiters.ts): one LISTEN
 * per process on the channel drizzle/0014's trigger notifies, on the connection the database
 * keeps for notifications (src/db/postgres.ts), never one per waiter. When the LISTEN takes effect
 * again (the driver reconnected), notifications may have been lost: every waiter reads again.
 * On close, every waiter is answered at once (preClose, before the server waits for in-flight
 * requests); the database's close ends the LISTEN.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { EVENTS_CHANNEL } from './event-waiters.ts';

export default fp(
  async function eventWaits(app: FastifyInstance) {
    const { waiters } = app.services.events;
    app.addHook('preClose', async () => waiters.close());
    try {
      await app.database.listen(
        EVENTS_CHANNEL,
        (payload) => waiters.notify(payload),
        () => waiters.wakeAll(),
      );
    } catch (err) {
      // Waits still end: on their timer, with what is there then.
      app.log.warn({ err }, 'cannot LISTEN for events: long polls answer only when they time out');
    }
  },
  { name: 'event-waits', fastify: '5.x', dependencies: ['database', 'services'] },
);
