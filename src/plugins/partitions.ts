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

declare module 'fastify' {
  interface FastifyInstance {
    /** The partitions made before the first request, one start-up line (src/server.ts). */
    partitionsMadeAtStart: readonly PartitionMade[];
  }
}

export interface PartitionMade {
  database: string;
  table: string;
  partition: string;
}

const EVERY_MS = 3_600_000;

export default fp(
  async function partitions(app: FastifyInstance) {
    const madeAtStart: PartitionMade[] = [];
    let starting = true;
    app.decorate('partitionsMadeAtStart', madeAtStart);
    const keepers = app.services.partitioned.map(({ database, db, tables }) => {
      const log = app.log.child({ component: 'partitions', database });
      // The request log's own database is always PostgreSQL (src/config.ts).
      const concurrently = database !== 'primary' || app.database.driver === 'postgres';
      // What the first make() does is housekeeping of the start, told in one line with the rest
      // of it; from then on each partition made or dropped is a line of its own.
      const keeper = new PartitionKeeper(db, tables, concurrently, {
        info(fields: { table?: string; partition?: string }, message: string) {
          if (starting && message === 'partition made' && fields.table && fields.partition)
            madeAtStart.push({ database, table: fields.table, partition: fields.partition });
          else log.info(fields, message);
        },
      });
      app.metrics?.observePartitions(database, () => keeper.partitions);
      const failed = (err: unknown) =>
        log.warn({ err }, 'partition maintenance failed; the next hour tries again');
      return { keeper, failed };
    });
    let timer: NodeJS.Timeout | undefined;
    app.addHook('onReady', async () => {
      await Promise.all(keepers.map(({ keeper, failed }) => keeper.make().catch(failed)));
      starting = false;
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
