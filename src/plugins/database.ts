import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { openDatabase, type DatabaseHandle, type Db } from '../db/client.ts';
import { DRAIN_SHARES, POOL_GRACE_MS, within } from '../lib/drain.ts';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
    database: DatabaseHandle;
  }
}

/**
 * Opens the database chosen by DATABASE_URL (and DATABASE_DIRECT_URL), migrates it, and closes
 * it with the app, last: statements still running get at most 5 s, and never past the pools'
 * share of SHUTDOWN_TIMEOUT_MS (src/plugins/graceful-close.ts).
 */
export default fp(
  async function database(app: FastifyInstance) {
    const handle = await openDatabase({
      databaseUrl: app.config.databaseUrl,
      directUrl: app.config.databaseDirectUrl,
      preparedStatements: app.config.databasePreparedStatements,
      pgliteDir: app.config.pgliteDir,
      poolWaitMs: app.config.databasePoolWaitMs,
      searchTimeoutMs: app.config.searchTimeoutMs,
      requestLogUrl: app.config.requestLogDatabaseUrl,
    });
    app.decorate('database', handle);
    app.decorate('db', handle.db);
    app.addHook('onClose', async () => {
      const left = app.drain.left(DRAIN_SHARES.pools);
      if ((await within(handle.close(Math.min(POOL_GRACE_MS, left)), left + 500)) === 'cut')
        app.log.warn('shutting down: the database did not close in time');
    });
  },
  { name: 'database', fastify: '5.x', dependencies: ['config', 'graceful-close'] },
);
