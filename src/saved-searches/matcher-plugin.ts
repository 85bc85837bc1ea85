/**
 * Runs the saved searches' matcher (matcher-worker.ts; built by createServices when
 * SAVED_SEARCH_MATCHER is on) with the app, whether or not the process delivers webhooks
 * (WEBHOOK_WORKER): it starts once the app is ready and stops when the close begins; the close
 * waits for the passes in flight to commit, within their share of SHUTDOWN_TIMEOUT_MS (before
 * the database closes: onClose hooks run in reverse registration order). Every listing write
 * queues its listing in its own statement while there is a saved search, whoever writes it
 * (src/services.ts); this plugin only matches. SAVED_SEARCH_MATCHER=false leaves matching to
 * other processes.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { DRAIN_SHARES, within } from '../lib/drain.ts';

export default fp(
  async function savedSearchMatcher(app: FastifyInstance) {
    const matcher = app.services.matcher;
    if (!matcher) return;

    // A listing write that queued its listing (there is a saved search) wakes this lane once its
    // request is answered, when it has committed. Polling covers the other processes' writes.
    app.services.wakeUps.on('matching', () => matcher.nudge());
    app.addHook('onReady', async () => matcher.start());
    // No new pass once the close begins; the one in flight commits while the requests drain.
    let stopped: Promise<void> = Promise.resolve();
    app.addHook('preClose', async () => {
      stopped = matcher.stop();
    });
    app.addHook('onClose', async () => {
      if ((await within(stopped, app.drain.left(DRAIN_SHARES.matches))) === 'cut')
        app.log.warn('shutting down: a saved search match pass did not end in time (rolled back)');
    });
  },
  {
    name: 'saved-search-matcher',
    fastify: '5.x',
    dependencies: ['config', 'graceful-close', 'database', 'services'],
  },
);
