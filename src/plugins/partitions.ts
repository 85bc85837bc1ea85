/**
 * The tables partitioned by time (src/db/partitions.ts; docs/scaling.md, partitions): at start,
 * the current and coming spans are made before the first request (a few statements), then every
 * hour one instance, holding the lease, makes ahead and drops behind. A run that fails is logged
 * and tried again the next hour; three days made ahead leave room for many. One keeper per
 * database (the primary, and the request log's own with REQUEST_LOG_DATABASE_URL), each with its
 * lease in that database's maintenance_leases.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PartitionKeeper } from '../db/partitions.ts';

const EVERY_MS = 3_600_000;

export default fp(
  async function partitions(app: FastifyInstance) {
    const keepers = app.services.partitioned.map(({ database, db, tables }) => {
      const log = app.log.child({ component: 'partitions', database });
      // The request log's own database is always PostgreSQL (src/config.ts).
      const concurrently = database !== 'primary' || app.database.driver === 'postgres';
      const keeper = new PartitionKeeper(db, tables, concurrently, log);
      app.metrics?.observePartitions(database, () => keeper.partitions);
      const failed = (err: unknown) =>
        log.warn({ err }, 'partition maintenance failed; the next hour tries again');
      return { keeper, failed };
    });
    let timer: NodeJS.Timeout | undefined;
    app.addHook('onReady', async () => {
      await Promise.all(keepers.map(({ keeper, failed }) => keeper.make().catch(failed)));
      // Dropping may wait on long transactions (DETACH ... CONCURRENTLY): never before serving.
      const run = () => {
        for (const { keeper, failed } of keepers) void keeper.run().catch(failed);
      };
      run();
      timer = setInterval(run, EVERY_MS);
      timer.unref();
    });
    app.addHook('onClose', async () => clearInterval(timer));
  },
  { name: 'partitions', fastify: '5.x', dependencies: ['database', 'services', 'metrics'] },
);
