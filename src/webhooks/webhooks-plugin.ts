/**
 * Runs the webhook delivery worker (built by createServices when WEBHOOK_WORKER is on) with the
 * app: it starts once the app is ready and stops claiming when the close begins; the close waits
 * for the attempts in flight to be sent and recorded, within their share of SHUTDOWN_TIMEOUT_MS
 * (before the database closes: onClose hooks run in reverse registration order). Events themselves
 * are recorded by the services (the recorder is one of the listing writes' recordings,
 * src/services.ts listingRecordings), so every door records them; this plugin only delivers.
 * WEBHOOK_WORKER=false leaves delivery to other processes; the saved searches' matcher has its own
 * plugin and setting (src/saved-searches/matcher-plugin.ts, SAVED_SEARCH_MATCHER).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { DRAIN_SHARES, within } from '../lib/drain.ts';
import type { DeliveryWorker } from './delivery-worker.ts';

/** After the attempts' share of the shutdown, recording their outcomes may take this long. */
const RECORD_MS = 1000;

declare module 'fastify' {
  interface FastifyInstance {
    /** The delivery worker (null when WEBHOOK_WORKER=false). */
    webhookWorker: DeliveryWorker | null;
  }
}

export default fp(
  async function webhooks(app: FastifyInstance) {
    // The backlog is every process's, worker or not.
    app.metrics?.observeWebhookBacklog(() => app.services.endpoints.deliveryBacklog());
    const worker = app.services.deliveryWorker;
    if (!worker) {
      app.decorate('webhookWorker', null);
      return;
    }
    app.decorate('webhookWorker', worker);

    // Recorded deliveries wake the worker (a listing change's once its request is answered,
    // when it has committed); polling covers the other processes' events.
    app.services.wakeUps.on('deliveries', () => worker.nudge());

    app.addHook('onReady', async () => {
      worker.start();
    });
    // Claiming stops as soon as the close begins, so the attempts in flight are sent while the
    // requests drain; past its share of SHUTDOWN_TIMEOUT_MS an attempt is cut short and recorded
    // as a failure (retried on the schedule). The wait itself is bounded too: a stalled database
    // leaves the attempt claimed, and its lease lets another worker make it again.
    let stopped: Promise<void> = Promise.resolve();
    app.addHook('preClose', async () => {
      stopped = worker.stop(app.drain.left(DRAIN_SHARES.webhooks));
    });
    app.addHook('onClose', async () => {
      const bound = app.drain.left(DRAIN_SHARES.webhooks) + RECORD_MS;
      if ((await within(stopped, bound)) === 'cut')
        app.log.warn('shutting down: webhook outcomes not recorded in time (their leases expire)');
    });
  },
  {
    name: 'webhooks',
    fastify: '5.x',
    dependencies: ['config', 'graceful-close', 'database', 'services', 'metrics'],
  },
);
