import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Replica } from '../db/replica.ts';
import { DRAIN_SHARES, POOL_GRACE_MS } from '../lib/drain.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** DATABASE_REPLICA_URL's replica, measured while the app runs; null without one. */
    replica: Replica | null;
  }
}

/**
 * Opens the read replica (src/db/replica.ts) beside the primary, measures its lag on a timer of
 * the server's own (unref'd), and stops both with the app. A replica that is down at start is
 * logged and skipped, not fatal: anonymous reads go to the primary until it answers.
 */
export default fp(
  async function replica(app: FastifyInstance) {
    const settings = app.config.databaseReplica;
    if (!settings) {
      app.decorate('replica', null);
      return;
    }
    const replica = new Replica({
      url: settings.url,
      // A replica exists only beside a PostgreSQL DATABASE_URL (src/config.ts). Its position is
      // read on the direct URL when there is one: the poll's session settings would not pass a
      // transaction-mode pooler.
      primaryUrl: app.config.databaseDirectUrl ?? app.config.databaseUrl!,
      maxLagMs: settings.maxLagMs,
      poolSize: settings.poolSize,
      poolWaitMs: app.config.databasePoolWaitMs,
      statementTimeoutMs: app.config.searchTimeoutMs,
      log: app.log.child({ component: 'db-replica' }),
    });
    app.decorate('replica', replica);
    app.addHook('onClose', async () =>
      replica.close(Math.min(POOL_GRACE_MS, app.drain.left(DRAIN_SHARES.pools))),
    );
    await replica.start();
  },
  { name: 'replica', fastify: '5.x', dependencies: ['config', 'graceful-close', 'database'] },
);
