/**
 * The webhook outbox partitioned by week (issue #45; drizzle/0016,
 * src/events/outbox-partitions.ts): events, deliveries and attempts made two weeks ahead at
 * start, a page of events exactly once across a week's boundary and reading only the partitions
 * it needs, a lookup by event or delivery id reading one partition, and retention dropping whole
 * weeks (events with their deliveries, attempts a week later), never a DELETE, on both databases.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import type { Db } from '../../src/db/client.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';
import { OUTBOX_PARTITIONS, timeOrderedId } from '../../src/events/outbox-partitions.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { explaining, planText } from '../helpers/explaining.ts';

const DAY = 86_400_000;
const WEEK = 7 * DAY;
const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

const app = await buildTestApp(t, { WEBHOOK_WORKER: 'false' });
const { appId } = await createDeveloper(app);
const events = new EventsRepository(app.db);
const today = Math.floor(Date.now() / DAY) * DAY;
/** This week's Monday 00:00 UTC, and the next. */
const monday = today - ((new Date(today).getUTCDay() + 6) % 7) * DAY;
const nextMonday = monday + WEEK;
const iso = (ms: number) => new Date(ms).toISOString();
const suffix = (ms: number) => iso(ms).slice(0, 10).replace(/-/g, '');
const TABLES = ['webhook_events', 'webhook_deliveries', 'webhook_delivery_attempts'];

const [endpoint] = await queryRows<{ id: string }>(
  app.db,
  sql`insert into webhook_endpoints (app_id, environment, url, secret)
      values (${appId}, 'sandbox', 'https://hooks.example.com/outbox', 'svc_whsec_test') returning id`,
);
const endpointId = endpoint!.id;

function keeper(lines: string[]) {
  return new PartitionKeeper(app.db, OUTBOX_PARTITIONS, onPostgres, {
    info: (fields, message) =>
      lines.push(`${message} ${(fields as { partition: string }).partition}`),
  });
}

/**
 * Events at `times` (ms; distinct), each with a delivery to the endpoint and an attempt a second
 * after it, ids made as recordMany makes them; returns the events' ids, oldest first.
 */
async function eventsAt(times: number[], type = 'ping'): Promise<string[]> {
  const at = JSON.stringify(times.map(iso));
  const rows = await queryRows<{ id: string }>(
    app.db,
    sql`with t as (select x::timestamptz as at from jsonb_array_elements_text(${at}::jsonb) x),
        ev as (
          insert into webhook_events (id, app_id, environment, type, data, created_at)
          select ${timeOrderedId(sql`t.at`)}, ${appId}::uuid, 'sandbox', ${type}, '{}', t.at from t
          returning id, created_at
        ), dl as (
          insert into webhook_deliveries (id, event_id, endpoint_id, event_created_at, status, attempts)
          select ${timeOrderedId(sql`ev.created_at`)}, ev.id, ${endpointId}::uuid, ev.created_at, 'succeeded', 1
          from ev returning id, event_created_at
        ), at as (
          insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, duration_ms)
          select dl.id, 1, dl.event_created_at + interval '1 second', 5 from dl
        )
        select id from ev order by created_at`,
  );
  return rows.map((r) => r.id);
}

class RollBack extends Error {}

/**
 * The plans (EXPLAIN ANALYZE) of what `run` sends, each statement also run for its rows, in a
 * transaction rolled back.
 */
async function explain(run: (db: Db) => Promise<unknown>): Promise<string> {
  let plan = '';
  await app.db
    .transaction(async (tx) => {
      const explained = explaining(tx, 'explain analyze');
      const plans: string[] = [];
      await run({
        execute: async (query: Parameters<Db['execute']>[0]) => {
          plans.push(planText(await explained.execute(query)));
          return tx.execute(query);
        },
      } as unknown as Db);
      plan = plans.join('\n');
      throw new RollBack();
    })
    .catch((err) => {
      if (!(err instanceof RollBack)) throw err;
    });
  return plan;
}

/** The partitions of `table` a plan reads (scans that ran). */
function scanned(plan: string, table: string): string[] {
  return [
    ...plan.matchAll(new RegExp(`Scan [^\\n]*?on (${table}_\\w+)[^\\n]*?\\(actual[^\\n]*`, 'g')),
  ]
    .filter((m) => !m[0].includes('never executed'))
    .map((m) => m[1]!);
}

t.test('at start: the rows from before partitioning, then a week each, two ahead', async (t) => {
  for (const table of TABLES) {
    const partitions = await listPartitions(app.db, table);
    t.same(
      partitions.map((p) => [p.name, p.from && iso(p.from.getTime()), iso(p.to.getTime())]),
      [
        [`${table}_before_partitions`, null, iso(nextMonday)],
        [`${table}_p${suffix(nextMonday)}`, iso(nextMonday), iso(nextMonday + WEEK)],
        [
          `${table}_p${suffix(nextMonday + WEEK)}`,
          iso(nextMonday + WEEK),
          iso(nextMonday + 2 * WEEK),
        ],
      ],
      `${table}: to the next Monday, then two weeks, no gap`,
    );
  }
  const lines: string[] = [];
  await keeper(lines).make();
  t.same(lines, [], 'a second run makes nothing twice');
});

t.test('a page spanning two weeks, exactly once; lookups by id read one partition', async (t) => {
  const times = [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4].map((ms) => nextMonday + ms);
  const ids = await eventsAt(times, 'listing.created');
  const seen: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const rows = await events.page(
      { appId, environment: 'sandbox', type: 'listing.created' },
      3,
      cursor,
    );
    seen.push(...rows.slice(0, 3).map((r) => r.id));
    if (rows.length <= 3) break;
    cursor = rows[2]!.created_at;
  }
  t.same(seen, [...ids].reverse(), 'each event once, newest first');

  for (const [label, index, partition] of [
    ['before Monday', 4, 'before_partitions'],
    ['after Monday', 5, `p${suffix(nextMonday)}`],
  ] as const) {
    const id = ids[index]!;
    t.equal((await events.findById(id))?.id, id, `${label}: the event found by id`);
    const byEvent = await explain((db) => new EventsRepository(db).findById(id));
    t.same(
      scanned(byEvent, 'webhook_events'),
      [`webhook_events_${partition}`],
      `${label}: one partition of events read`,
      { byEvent },
    );
    t.match(byEvent, /Index Scan using webhook_events_\w+_id_idx/, 'by its index on id');

    const [delivery] = await events.deliveriesOf([(await events.findById(id))!]);
    const found = await new DeliveriesRepository(app.db).find(delivery!.id);
    t.equal(found?.event_id, id, `${label}: its delivery found by id`);
    const byDelivery = await explain((db) => new DeliveriesRepository(db).find(delivery!.id));
    t.same(
      [...new Set(scanned(byDelivery, 'webhook_deliveries'))],
      [`webhook_deliveries_${partition}`],
      `${label}: one partition of deliveries read`,
      { byDelivery },
    );
    t.same(
      scanned(byDelivery, 'webhook_events'),
      [`webhook_events_${partition}`],
      `${label}: and of events`,
      { byDelivery },
    );
    const detail = await explain(async (db) => {
      const repository = new EventsRepository(db);
      const event = (await repository.findById(id))!;
      const deliveries = await repository.deliveriesOf([event]);
      return repository.attemptsOf(
        deliveries.map((d) => d.id),
        event.created_at,
      );
    });
    t.same(
      [...new Set(scanned(detail, 'webhook_deliveries'))],
      [`webhook_deliveries_${partition}`],
      `${label}: the event's page reads its week's deliveries only`,
      { detail },
    );
  }

  // A thousand events in each week, unanalyzed (as this week's partition is until someone
  // analyzes it): the first page reads the newest week's rows only.
  const bulk = Array.from(
    { length: 3000 },
    (_, i) => monday + 7 + Math.floor((i * 3 * WEEK) / 3000),
  );
  await eventsAt(bulk, 'listing.updated');
  const page = await explain((db) =>
    new EventsRepository(db).page(
      { appId, environment: 'sandbox', type: 'listing.updated' },
      25,
      undefined,
    ),
  );
  const reads = [
    ...page.matchAll(
      /Scan[^\n]* on (webhook_events_\w+) [^\n]*?(?:rows=([\d.]+) loops=1|never executed)/g,
    ),
  ].map((m) => [m[1]!, Number(m[2] ?? 0)] as const);
  t.ok(reads.length >= 3, 'each partition within the retention is planned for', { page });
  const newest = reads.find(([p]) => p === `webhook_events_p${suffix(nextMonday + WEEK)}`);
  t.ok(newest && newest[1] <= 27, `the newest week: the page's rows (${newest?.[1]})`, { page });
  for (const [partition, rows] of reads.filter((r) => r !== newest))
    t.ok(rows <= 1, `${partition}: ${rows} row(s) read, not its thousand`, { page });
});

t.test(
  'a long poll reads on from its cursor: its rows, at most an entry of each later week',
  async (t) => {
    // The thousand events of each of three weeks (the test above), unanalyzed: the forward page
    // from a cursor in the first week reads that week's next rows, and the weeks after it only as
    // far as the merge needs (an index entry each at most).
    const cursor = iso(monday + 2 * DAY);
    const plan = await explain((db) =>
      new EventsRepository(db).pageAfter(
        { appId, environment: 'sandbox', type: 'listing.updated' },
        25,
        cursor,
        iso(nextMonday + 3 * WEEK),
      ),
    );
    const reads = [
      ...plan.matchAll(
        /Scan[^\n]* on (webhook_events_\w+) [^\n]*?(?:rows=([\d.]+) loops=1|never executed)/g,
      ),
    ].map((m) => [m[1]!, Number(m[2] ?? 0)] as const);
    // The partition holding the cursor (this week's rows are in the one from before partitioning,
    // which reaches to next Monday).
    const holding = (await listPartitions(app.db, 'webhook_events')).find(
      (p) => (p.from === null || p.from.getTime() <= Date.parse(cursor)) && p.to > new Date(cursor),
    );
    const first = reads.find(([p]) => p === holding?.name);
    t.ok(first && first[1] >= 25 && first[1] <= 27, `the cursor's week: the page's rows`, { plan });
    for (const [partition, rows] of reads.filter((r) => r !== first))
      t.ok(rows <= 1, `${partition}: ${rows} row(s) read, not its thousand`, { plan });
  },
);

t.test(
  'retention drops whole weeks, deliveries with their events, attempts a week on',
  async (t) => {
    const ids = await eventsAt([nextMonday + WEEK - 1, nextMonday + WEEK], 'listing.deleted');
    const deliveries = await queryRows<{ id: string }>(
      app.db,
      sql`select id from webhook_deliveries where event_id in (${ids[0]}, ${ids[1]})`,
    );
    const count = async (table: string) => {
      const column =
        table === 'webhook_events'
          ? 'id'
          : table === 'webhook_deliveries'
            ? 'event_id'
            : 'delivery_id';
      const of = table === 'webhook_delivery_attempts' ? deliveries.map((d) => d.id) : ids;
      const [row] = await queryRows<{ n: number }>(
        app.db,
        sql`select count(*)::int as n from ${sql.identifier(table)}
          where ${sql.identifier(column)} in (select jsonb_array_elements_text(${JSON.stringify(of)}::jsonb))`,
      );
      return row!.n;
    };
    // As the hourly run sees it 30 days after the end of the week of the first of them.
    const lines: string[] = [];
    const at = new Date(nextMonday + WEEK + 30 * DAY + 60_000);
    t.equal(await keeper(lines).run(at), true, 'the run held the lease');
    const dropped = lines
      .filter((l) => l.startsWith('partition dropped'))
      .map((l) => l.split(' ')[2]);
    t.same(
      dropped,
      [
        'webhook_events_before_partitions',
        `webhook_events_p${suffix(nextMonday)}`,
        'webhook_deliveries_before_partitions',
        `webhook_deliveries_p${suffix(nextMonday)}`,
        'webhook_delivery_attempts_before_partitions',
      ],
      'the weeks wholly past 30 days went, events with their deliveries, attempts past 37 days',
    );
    const left = await queryRows<{ id: string }>(
      app.db,
      sql`select id from webhook_events where type = 'listing.deleted'`,
    );
    t.same(
      left.map((r) => r.id),
      [ids[1]],
      'the event a millisecond later stays',
    );
    t.equal(await count('webhook_deliveries'), 1, 'its delivery stays, the other went');
    t.equal(
      await count('webhook_delivery_attempts'),
      2,
      'both attempts stay: made a second after their events, in the later week, kept a week longer',
    );

    const later: string[] = [];
    await keeper(later).run(new Date(at.getTime() + WEEK));
    t.same(
      later.filter((l) => l.startsWith('partition dropped')).map((l) => l.split(' ')[2]),
      [
        `webhook_events_p${suffix(nextMonday + WEEK)}`,
        `webhook_deliveries_p${suffix(nextMonday + WEEK)}`,
        `webhook_delivery_attempts_p${suffix(nextMonday)}`,
      ],
      "a week on: the next week's events and deliveries, and the first week's attempts",
    );
    t.equal(await count('webhook_events'), 0, 'the later event went');
    t.equal(await count('webhook_delivery_attempts'), 2, 'the attempts of the week after stay');
    const tables = await queryRows<{ n: number }>(
      app.db,
      sql`select count(*)::int as n from pg_class where relname like 'webhook_%_before_partitions'`,
    );
    t.equal(tables[0]!.n, 0, 'dropped, not detached and kept');
  },
);
