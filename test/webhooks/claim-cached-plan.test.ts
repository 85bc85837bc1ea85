/**
 * The worker's claim is planned for the outbox as it is now, not as it was when its connection
 * first ran it (issue #55, bench:noisy). postgres.js prepares each statement once per connection,
 * and after five runs PostgreSQL may keep one generic plan for it until the tables' statistics
 * change. Made while the outbox was empty, that plan offered each endpoint's due attempts
 * through the due index on next_attempt_at alone (every due delivery read and filtered by its
 * endpoint, once per endpoint) and updated the claimed rows by reading the partition whole: behind
 * a flood's 40,000 deliveries each claim took 1.2-1.6 s, so another developer's alert waited
 * seconds in the worker. Reproduced as it happens: statistics of the empty outbox, claims on it
 * (the plan cached), then a burst; the rows the next claim reads are counted by PostgreSQL
 * itself (pg_stat_xact_user_tables: this transaction's scans), all on one connection.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import type { Db } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { outboxBurst, plainEndpoints } from './support.ts';

const EVENTS = 1_000;
const ENDPOINTS = 4;
const onPostgres = Boolean(process.env.DATABASE_URL) && process.env.DATABASE_URL !== 'memory://';

const app = await buildTestApp(t, { WEBHOOK_WORKER: 'false' });
const dev = await createDeveloper(app);
const endpoints = await plainEndpoints(app.db, dev.appId, ENDPOINTS);
await app.db.execute(sql`analyze webhook_deliveries`);
await app.db.execute(sql`analyze webhook_events`);

const fairness = {
  defaultRoom: 1,
  endpointRoom: endpoints.map((e) => ({ endpoint_id: e.id, room: 2, in_flight: 1 })),
};

/** Rows of webhook_deliveries read so far in this transaction: by scans and by index lookups. */
async function deliveriesRead(tx: Db): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    tx,
    sql`select coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::int as n
        from pg_stat_xact_user_tables where relname like 'webhook_deliveries%'`,
  );
  return row!.n;
}

class RollBack extends Error {}

t.test(
  `a claim after ${ENDPOINTS * EVENTS} deliveries arrive reads a few, on a connection that claimed before`,
  async (t) => {
    await app.db
      .transaction(async (tx) => {
        const repository = new DeliveriesRepository(tx);
        // More runs than PostgreSQL's five custom plans before it may settle on a generic one.
        for (let i = 0; i < 8; i += 1)
          t.same(await repository.claim(8, 60_000, fairness), [], 'nothing due yet');
        await outboxBurst(tx, dev.appId, EVENTS);
        const before = await deliveriesRead(tx);
        const claimed = await repository.claim(8, 60_000, fairness);
        const read = (await deliveriesRead(tx)) - before;
        t.equal(claimed.length, 8, 'a full claim: two for each endpoint');
        t.same(
          new Set(claimed.map((c) => c.endpoint_id)).size,
          ENDPOINTS,
          'every endpoint offered its own',
        );
        // Each endpoint's first due rows and the claimed rows by id: tens, not the backlog
        // (before the fix: 4,008, the partition whole).
        t.ok(read <= 100, `${read} rows of webhook_deliveries read for a claim of 8`);
        if (onPostgres) t.ok(read > 0, "PostgreSQL counted the claim's reads");
        throw new RollBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RollBack)) throw err;
      });
  },
);
