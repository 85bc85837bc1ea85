import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { openDatabase, type DatabaseHandle, type Db } from '../db/client.ts';

declare module 'fastify' {
  interface FastifyInstance {
    db: Db;
    database: DatabaseHandle;
  }
}

/**
 * Opens the database chosen by DATABASE_URL (and DATABASE_DIRECT_URL), migrates it, and closes
 * it with the app.
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
    });
    app.decorate('database', handle);
    app.decorate('db', handle.db);
    app.addHook('onClose', async () => handle.close());
  },
  { name: 'database', fastify: '5.x', dependencies: ['config'] },
);
