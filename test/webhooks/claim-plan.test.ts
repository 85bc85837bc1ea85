/**
 * The worker's statements cost the same whatever the backlog (issue #20): a claim and a batch of
 * successes look deliveries up by primary key and by each endpoint's due index, never by walking
 * every pending delivery. The earlier claim (`d.id in (select id from offered ...)`) was planned
 * as a walk over all due pending rows filtered against the offer: 9 ms per claim behind a
 * backlog of 2,000, so draining a burst slowed down as the burst grew. Reproduced as it happens:
 * the statistics are taken while the outbox is empty, then a burst fills it.
 *
 * On PostgreSQL also: two workers claiming at the same moment get different rows, both a full
 * claim (the second is offered each endpoint's next rows instead of coming back short).
 */
import { sql, type SQL } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { explaining, planText } from '../helpers/explaining.ts';
import { buildTestApp } from '../helpers/app.ts';
import { outboxBurst, plainEndpoints } from './support.ts';

const EVENTS = 2_000;
const ENDPOINTS = 3;
const BACKLOG = EVENTS * ENDPOINTS;
const onPostgres = Boolean(process.env.DATABASE_URL) && process.env.DATABASE_URL !== 'memory://';

const app = await buildTestApp(t, { WEBHOOK_WORKER: 'false', SAVED_SEARCH_MATCHER: 'false' });
const dev = await createDeveloper(app);
const endpoints = await plainEndpoints(app.db, dev.appId, ENDPOINTS);
// Statistics of the empty outbox, then the burst (autovacuum kept out of it).
await app.db.execute(sql`analyze webhook_deliveries`);
// The partition of this week (drizzle/0016: the one from before partitioning, on a new database).
await app.db.execute(
  sql`alter table webhook_deliveries_before_partitions set (autovacuum_enabled = false)`,
);
await outboxBurst(app.db, dev.appId, EVENTS);

const fairness = {
  defaultRoom: 4,
  endpointRoom: endpoints.map((e) => ({ endpoint_id: e.id, room: 4, in_flight: 0 })),
};

class RollBack extends Error {}

const dialect = new PgDialect();

/** EXPLAIN ANALYZE of every statement `run` sends, in a transaction rolled back. */
async function planOf(
  run: (repository: DeliveriesRepository) => Promise<unknown>,
): Promise<string> {
  let plan = '';
  await app.db
    .transaction(async (tx) => {
      // Every statement the repository runs (db.execute, which src/db/rows.ts uses too) is
      // explained; the repository gets no rows back.
      const explained = explaining(tx, 'explain analyze');
      const collect = (result: unknown) => {
        plan += `${planText(result)}\n`;
        return [];
      };
      const stand: Db = {
        // A SET (the claim's planner setting) is run, not explained.
        execute: async (query: SQL) =>
          /^\s*set /i.test(dialect.sqlToQuery(query).sql)
            ? tx.execute(query)
            : collect(await explained.execute(query)),
        // fail() writes in a transaction: its statements are explained one after the other.
        transaction: (run: (tx: Db) => Promise<unknown>) => run(stand),
      } as unknown as Db;
      await run(new DeliveriesRepository(stand));
      throw new RollBack();
    })
    .catch((err: unknown) => {
      if (!(err instanceof RollBack)) throw err;
    });
  return plan;
}

/**
 * Rows (or index entries) read from webhook_deliveries by every scan of it or its indexes (rows x
 * loops), and rows thrown away by filters.
 */
function readsOf(plan: string): { read: number; thrownAway: number } {
  let read = 0;
  // Heap and index scans of the table or of its indexes (webhook_deliveries_*); PGlite's
  // PostgreSQL prints rows=1.00.
  for (const match of plan.matchAll(
    /Scan .*?on webhook_deliveries\w* .*?actual time=[\d.]+\.\.[\d.]+ rows=([\d.]+) loops=(\d+)/g,
  ))
    read += Number(match[1]) * Number(match[2]);
  const thrownAway = [...plan.matchAll(/Rows Removed by (?:Join )?Filter: (\d+)/g)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
  return { read, thrownAway };
}

/**
 * No partition holding rows is read whole: a sequential scan only of an empty one (a week made
 * ahead, known empty: reading it is reading nothing).
 */
function noSeqScanOfRows(t: Test, plan: string): void {
  const scans = [
    ...plan.matchAll(
      /Seq Scan on (webhook_deliveries\w*) .*?actual time=[\d.]+\.\.[\d.]+ rows=(\d+)/g,
    ),
  ];
  t.notOk(
    scans.some((m) => m[1] === 'webhook_deliveries' || m[2] !== '0'),
    'no sequential scan of the outbox (only of empty partitions)',
    { plan },
  );
}

t.test(`a claim of 8 reads a few rows, not the backlog of ${BACKLOG}`, async (t) => {
  const plan = await planOf((repository) => repository.claim(8, 60_000, fairness));
  t.match(plan, /Update on webhook_deliveries/, 'the claim was explained');
  const { read, thrownAway } = readsOf(plan);
  t.ok(read > 0 && read <= 50, `${read} rows of webhook_deliveries read (each endpoint's first)`);
  t.ok(thrownAway <= 50, `${thrownAway} rows read and thrown away`);
  noSeqScanOfRows(t, plan);
});

t.test(`a batch of 8 successes reads its 8 rows, not the backlog`, async (t) => {
  const claimed = await queryRows<{ id: string }>(
    app.db,
    sql`select id from webhook_deliveries order by next_attempt_at limit 8`,
  );
  const plan = await planOf((repository) =>
    repository.succeedMany(
      claimed.map((row) => ({ id: row.id, attempts: 0, responseCode: 200, durationMs: 5 })),
    ),
  );
  t.match(plan, /Update on webhook_deliveries/, 'the batch was explained');
  const { read, thrownAway } = readsOf(plan);
  t.ok(read > 0 && read <= 50, `${read} rows of webhook_deliveries read`);
  t.ok(thrownAway <= 50, `${thrownAway} rows read and thrown away`);
});

t.test('a failed attempt reads its row, not the backlog', async (t) => {
  const [row] = await queryRows<{
    id: string;
    event_id: string;
    endpoint_id: string;
    event_created_at: string;
  }>(
    app.db,
    sql`select id, event_id, endpoint_id, event_created_at::text from webhook_deliveries
        order by next_attempt_at limit 1`,
  );
  const claim = { ...row!, attempts: 0 } as Parameters<DeliveriesRepository['fail']>[0];
  const plan = await planOf((repository) =>
    repository.fail(claim, { responseCode: 500, error: 'HTTP 500', durationMs: 5 }, 60_000),
  );
  t.match(plan, /Update on webhook_deliveries/, 'the outcome was explained');
  const { read, thrownAway } = readsOf(plan);
  t.ok(read > 0 && read <= 10, `${read} rows of webhook_deliveries read`);
  t.ok(thrownAway <= 10, `${thrownAway} rows read and thrown away`);
});

t.test(
  'two workers claiming at once get different rows, both a full claim',
  { skip: onPostgres ? false : 'PostgreSQL only: PGlite has one connection, claims take turns' },
  async (t) => {
    const repository = new DeliveriesRepository(app.db);
    let first: string[] = [];
    let second: string[] = [];
    // The first claim's transaction stays open (its rows locked, not yet leased) while the
    // second claims on another connection.
    await app.db
      .transaction(async (tx) => {
        first = (await new DeliveriesRepository(tx).claim(6, 60_000, fairness)).map((c) => c.id);
        second = (await repository.claim(6, 60_000, fairness)).map((c) => c.id);
        throw new RollBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RollBack)) throw err;
      });
    t.equal(first.length, 6, 'the first claim: 6');
    t.equal(second.length, 6, 'the second claim: 6 as well, not what was left of the same rows');
    t.equal(new Set([...first, ...second]).size, 12, 'no row in both');
  },
);
