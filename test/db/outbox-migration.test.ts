/**
 * Issue #45, the outbox: an existing deployment's webhook outbox becomes partitioned by week at
 * its next start (drizzle/0016), on either database: no row moves (each table as it was becomes
 * the partition of everything before the next Monday 00:00 UTC), deliveries get their event's
 * created_at, every row stays readable through the API's paths, ids from before (random) are
 * still found, and the rows from before go whole once past retention. At 100,000 events, each
 * with a delivery and an attempt, over the last 29 days; the time it took is in
 * docs/operations.md.
 */
import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import t from 'tap';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';
import { OUTBOX_PARTITIONS } from '../../src/events/outbox-partitions.ts';
import { deploymentBefore } from '../helpers/migrations.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const EVENTS = 100_000;
const DAY = 86_400_000;
const WEEK = 7 * DAY;
/** The migrations before drizzle/0016_partitioned_outbox.sql. */
const BEFORE = 16;
const TABLES = ['webhook_events', 'webhook_deliveries', 'webhook_delivery_attempts'];

/**
 * The outbox an existing deployment holds: one app's events over the last 29 days, random ids
 * (as before 0016), a delivery each to its endpoint, an attempt of each a second later.
 */
const SEED = `
  insert into users (username, display_name, password_hash) values ('before_0016', 'B', 'x');
  insert into apps (owner_id, name) select id, 'before 0016' from users where username = 'before_0016';
  insert into webhook_endpoints (app_id, environment, url, secret)
  select id, 'sandbox', 'https://hooks.example.com/before', 'svc_whsec_x' from apps where name = 'before 0016';
  insert into webhook_events (id, app_id, environment, type, data, created_at)
  select md5('e' || i), a.id, 'sandbox', 'listing.updated', '{"listing":{}}',
    now() - (i * interval '29 days' / ${EVENTS})
  from apps a, generate_series(1, ${EVENTS}) as i where a.name = 'before 0016';
  insert into webhook_deliveries (id, event_id, endpoint_id, status, attempts, last_attempt_at)
  select md5('d' || i), md5('e' || i), ep.id, 'succeeded', 1, now()
  from webhook_endpoints ep, generate_series(1, ${EVENTS}) as i
  where ep.url = 'https://hooks.example.com/before';
  insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, response_code, duration_ms)
  select md5('d' || i), 1, now() - (i * interval '29 days' / ${EVENTS}) + interval '1 second', 200, 5
  from generate_series(1, ${EVENTS}) as i;`;

t.test('the outbox of a deployment becomes partitioned at its next start', async (t) => {
  const open = await deploymentBefore(t, BEFORE, SEED);
  const started = performance.now();
  const handle = await open();
  t.teardown(() => handle.close());
  const took = performance.now() - started;
  t.comment(
    `migrated ${EVENTS} events, deliveries and attempts in ${took.toFixed(0)} ms (start included)`,
  );
  const { db } = handle;

  const today = Math.floor(Date.now() / DAY) * DAY;
  const monday = today - ((new Date(today).getUTCDay() + 6) % 7) * DAY;
  for (const table of TABLES) {
    const partitions = await listPartitions(db, table);
    t.same(
      partitions.map((p) => [p.name, p.from, p.to.getTime()]),
      [[`${table}_before_partitions`, null, monday + WEEK]],
      `${table}: one partition, the table as it was, to the next Monday`,
    );
    const [count] = await queryRows<{ n: number }>(
      db,
      sql`select count(*)::int as n from ${sql.identifier(table)}`,
    );
    t.equal(count!.n, EVENTS, `${table}: every row is there`);
  }
  const [unfilled] = await queryRows<{ n: number }>(
    db,
    sql`select count(*)::int as n from webhook_deliveries d
        join webhook_events e on e.id = d.event_id
        where d.event_created_at is distinct from e.created_at`,
  );
  t.equal(unfilled!.n, 0, "each delivery has its event's created_at");

  const [app] = await queryRows<{ id: string }>(
    db,
    sql`select id from apps where name = 'before 0016'`,
  );
  const events = new EventsRepository(db);
  const scope = { appId: app!.id, environment: 'sandbox' as const };
  const page = await events.page(scope, 25, undefined);
  t.equal(page.length, 26, 'the newest page reads as before');
  t.equal(page[0]!.id, hex('e1'), 'newest first');
  const next = await events.page(scope, 25, page[24]!.created_at);
  t.equal(next[0]!.id, hex('e26'), 'and the next page after it');

  const old = await events.findById(hex('e2'));
  t.equal(old?.id, hex('e2'), 'an event id from before is found');
  const deliveries = await events.deliveriesOf([old!]);
  t.same(
    deliveries.map((d) => d.id),
    [hex('d2')],
    'with its delivery',
  );
  const attempts = await events.attemptsOf([hex('d2')], old!.created_at);
  t.equal(attempts.length, 1, 'and its attempt');
  const found = await new DeliveriesRepository(db).find(hex('d2'));
  t.equal(found?.event_id, hex('e2'), 'a delivery id from before is found');
  t.equal(
    (await new DeliveriesRepository(db).redeliver(hex('d3')))?.status,
    'pending',
    'and redelivered',
  );

  // The server's start makes the weeks ahead; new events land in their week's partition.
  const lines: string[] = [];
  const keeper = new PartitionKeeper(db, OUTBOX_PARTITIONS, onPostgres, {
    info: (fields, message) =>
      lines.push(`${message} ${(fields as { partition: string }).partition}`),
  });
  await keeper.make();
  t.equal(lines.length, 3 * 2, 'two weeks ahead made, of each table');
  const [recorded] = await db.transaction((tx) =>
    events.recordMany([{ ...scope, type: 'ping', data: { message: 'after' } }], tx),
  );
  t.equal(
    Number.parseInt(recorded!.id.slice(0, 12), 16),
    Math.floor(new Date(recorded!.created_at).getTime()),
    "a new event's id starts with its created_at's milliseconds",
  );
  t.match(
    recorded!.id,
    /^[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/,
    'a UUIDv7 without its dashes: version 7, the variant',
  );
  t.equal((await events.findById(recorded!.id))?.id, recorded!.id, 'found by id');
  t.equal(recorded!.deliveries.length, 1, 'its delivery made');

  // 29 days on, the rows from before still hold events within 30 days: kept.
  await keeper.run(new Date(monday + WEEK + 29 * DAY));
  t.notOk(
    lines.some((l) => l.endsWith('_before_partitions')),
    'kept while their newest event may be within the retention',
  );
  await keeper.run(new Date(monday + WEEK + 30 * DAY));
  t.same(
    lines.filter((l) => l.startsWith('partition dropped')),
    [
      'partition dropped webhook_events_before_partitions',
      'partition dropped webhook_deliveries_before_partitions',
    ],
    'events and deliveries dropped whole once their newest possible event is 30 days old',
  );
  await keeper.run(new Date(monday + WEEK + 37 * DAY));
  t.ok(
    lines.includes('partition dropped webhook_delivery_attempts_before_partitions'),
    'the attempts a week later',
  );
});

/** md5 of `text`, as the seed makes ids. */
function hex(text: string): string {
  return createHash('md5').update(text).digest('hex');
}
