/**
 * Runs the webhook delivery worker (built by createServices when WEBHOOK_WORKER is on) with the
 * app: it starts once the app is ready and stops on close, after the attempts in flight are
 * sent and recorded (before the database closes: onClose hooks run in reverse registration
 * order). Events themselves are
 * recorded by the services (src/services.ts subscribes the recorder to listing changes), so
 * every door records them; this plugin only delivers. WEBHOOK_WORKER=false leaves delivery to
 * other processes.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { DeliveryWorker } from './delivery-worker.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The delivery worker (null when WEBHOOK_WORKER=false). */
    webhookWorker: DeliveryWorker | null;
  }
}

export default fp(
  async function webhooks(app: FastifyInstance) {
    // The backlog is every process's, worker or not.
    app.metrics?.observeWebhookBacklog(() => app.services.webhooks.deliveryBacklog());
    const worker = app.services.deliveryWorker;
    if (!worker) {
      app.decorate('webhookWorker', null);
      return;
    }
    app.decorate('webhookWorker', worker);

    // A recorded event is a hint that something is or will soon be due: pings and redeliveries
    // are committed when they hint; a listing change's event commits with its request, so the
    // worker looks again once that request has been answered. Polling covers the rest.
    let recorded = false;
    app.services.eventRecorder.onRecorded(() => {
      recorded = true;
      setImmediate(() => worker.nudge());
    });
    app.addHook('onResponse', (_request, _reply, done) => {
      if (recorded) {
        recorded = false;
        worker.nudge();
      }
      done();
    });

    app.addHook('onReady', async () => worker.start());
    app.addHook('onClose', async () => worker.stop());
  },
  {
    name: 'webhooks',
    fastify: '5.x',
    dependencies: ['config', 'database', 'services', 'metrics'],
  },
);
