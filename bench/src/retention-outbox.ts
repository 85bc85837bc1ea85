/**
 * The webhook outbox's retention at volume (issue #45; docs/scaling.md, the outbox: a week a
 * partition), on databases of their own (dropped at the end): `--events` events in a week
 * (default 300,000), each with a delivery and an attempt as the worker leaves a delivered one.
 *
 *  1. delete: the retention as it was before partitioning (the worker's events.prune(): batches of
 *     1,000 oldest events past 30 days deleted, their deliveries and attempts by ON DELETE
 *     CASCADE) removing the week: WAL and time;
 *  2. drop: the partitioned outbox's retention (src/db/partitions.ts over OUTBOX_PARTITIONS)
 *     removing the week's partitions of the three tables: WAL and time;
 *  3. insert: events with their deliveries and attempts, 500 a statement, into the tables before
 *     and after partitioning: time per event, median of 5 rounds.
 *
 *   DATABASE_URL=postgres://... npm run bench:retention:outbox [-- --events 300000]
 *
 * WAL is the cluster's: run it on a PostgreSQL nothing else writes to meanwhile. Prints one JSON
 * object.
 */
import { parseArgs } from 'node:util';
import { sql, type SQL } from 'drizzle-orm';
import postgres from 'postgres';
import { openDatabase, type Db } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrations.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { connectionDb, SESSION_OPTIONS } from '../../src/db/postgres.ts';
import { OUTBOX_PARTITIONS, timeOrderedId } from '../../src/events/outbox-partitions.ts';
import { migrationsFolder } from '../../src/db/database.ts';
// The same folder of the migrations before partitioning the tests start from.
import { migrationsBefore } from '../../test/helpers/migrations.ts';
import { createBenchDatabase } from './seed.ts';
import { walBytesOf } from './wal.ts';

const { values } = parseArgs({ options: { events: { type: 'string', default: '300000' } } });
const EVENTS = Number(values.events);
const DAY = 86_400_000;
/** drizzle/0016_partitioned_outbox.sql is the 17th. */
const BEFORE_PARTITIONING = 16;
/** An event's data about as large as a listing's (docs/scaling.md: about 1.5 kB a row). */
const DATA = JSON.stringify({
  listing: { id: crypto.randomUUID(), description: 'x'.repeat(1200) },
});

const serverUrl = process.env.DATABASE_URL;
if (!serverUrl?.startsWith('postgres')) {
  console.error('DATABASE_URL must name a PostgreSQL server (databases of its own are made)');
  process.exit(1);
}

const cleanups: (() => void | Promise<void>)[] = [];
const scope = { teardown: (fn: () => void) => cleanups.push(fn) };

interface Outbox {
  url: string;
  db: Db;
  appId: string;
  endpointId: string;
  partitioned: boolean;
}

/** A database migrated up to before partitioning (or wholly), with an app and its endpoint. */
async function outbox(partitioned: boolean): Promise<Outbox> {
  const database = await createBenchDatabase(serverUrl!);
  cleanups.push(() => database.drop());
  const folder = partitioned ? migrationsFolder : migrationsBefore(scope, BEFORE_PARTITIONING);
  await migrate(database.url, SESSION_OPTIONS, folder);
  const client = postgres(database.url, { ...SESSION_OPTIONS, max: 1 });
  cleanups.push(() => client.end({ timeout: 5 }));
  const db = connectionDb(client);
  const [row] = (await client.unsafe(`
    with u as (insert into users (username, display_name, password_hash)
      values ('outbox', 'O', 'x') returning id),
    a as (insert into apps (owner_id, name) select id, 'outbox' from u returning id)
    insert into webhook_endpoints (app_id, environment, url, secret)
    select id, 'sandbox', 'https://hooks.example.com/outbox', 'svc_whsec_bench' from a
    returning app_id, id`)) as unknown as { app_id: string; id: string }[];
  return { url: database.url, db, appId: row!.app_id, endpointId: row!.id, partitioned };
}

/**
 * `count` events spread over [from, to) (ms), each with a delivered delivery and its attempt, in
 * one statement; ids as the code of the table's shape makes them.
 */
async function fill(box: Outbox, count: number, from: number, to: number): Promise<void> {
  const id = (at: SQL) =>
    box.partitioned ? timeOrderedId(at) : sql`replace(gen_random_uuid()::text, '-', '')`;
  const eventTime = box.partitioned ? sql`, event_created_at` : sql``;
  await box.db.execute(
    sql`with t as (
          select to_timestamp(${from / 1000}::float8 + ${(to - from) / 1000}::float8 * i / ${count}::float8) as at
          from generate_series(0, ${count - 1}) as i
        ), ev as (
          insert into webhook_events (id, app_id, environment, type, data, listing_id, created_at)
          select ${id(sql`t.at`)}, ${box.appId}::uuid, 'sandbox', 'listing.updated', ${DATA},
            gen_random_uuid(), t.at
          from t returning id, created_at
        ), dl as (
          insert into webhook_deliveries (id, event_id, endpoint_id, status, attempts,
            last_attempt_at, last_response_code ${eventTime})
          select ${id(sql`ev.created_at`)}, ev.id, ${box.endpointId}::uuid, 'succeeded', 1,
            ev.created_at + interval '1 second', 200 ${box.partitioned ? sql`, ev.created_at` : sql``}
          from ev returning id, last_attempt_at
        )
        insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, response_code,
          duration_ms)
        select dl.id, 1, dl.last_attempt_at, 200, 40 from dl`,
  );
}

/** The retention before partitioning, as the worker's events.prune() ran it. */
async function deleteAsBefore(box: Outbox): Promise<number> {
  let deleted = 0;
  for (;;) {
    const rows = await box.db.execute(
      sql`delete from webhook_events where id in (
            select id from webhook_events where created_at < now() - interval '30 days' limit 1000)
          returning id`,
    );
    const n = (rows as unknown as unknown[]).length;
    deleted += n;
    if (n === 0) return deleted;
  }
}

/** Microseconds per event written 500 a statement (with its delivery and attempt), median of 5. */
async function insertCost(box: Outbox, start: number): Promise<number> {
  const rounds: number[] = [];
  let at = start;
  for (let round = 0; round < 5; round += 1) {
    const statements = 20;
    const started = performance.now();
    for (let s = 0; s < statements; s += 1) {
      await fill(box, 500, at, at + 500);
      at += 1000;
    }
    rounds.push(((performance.now() - started) * 1000) / (statements * 500));
  }
  rounds.sort((a, b) => a - b);
  return Math.round(rounds[2]! * 10) / 10;
}

async function main(): Promise<void> {
  const now = Date.now();
  const result: Record<string, unknown> = { at: new Date(now).toISOString(), events: EVENTS };

  // 1. The DELETE of a week of events, 31 to 38 days old, before partitioning.
  const before = await outbox(false);
  {
    await fill(before, EVENTS, now - 38 * DAY, now - 31 * DAY);
    await fill(before, EVENTS / 10, now - DAY, now);
    await before.db.execute(sql`checkpoint`);
    const admin = postgres(before.url, { ...SESSION_OPTIONS, max: 1 });
    let deleted = 0;
    const [wal, ms] = await walBytesOf(admin, async () => {
      deleted = await deleteAsBefore(before);
    });
    await admin.end({ timeout: 5 });
    result.delete = { events: deleted, walBytes: wal, ms: Math.round(ms) };
    console.error(`[retention:outbox] delete: ${JSON.stringify(result.delete)}`);
  }

  // 2. The DROP of a week's partitions of the three tables.
  const after = await outbox(true);
  let later = now;
  {
    const handle = await openDatabase({ databaseUrl: after.url, pgliteDir: '', poolSize: 2 });
    cleanups.push(() => handle.close());
    const keeper = new PartitionKeeper(handle.db, OUTBOX_PARTITIONS, true, { info: () => {} });
    await keeper.make(new Date(now));
    const week = (await listPartitions(handle.db, 'webhook_events')).find((p) => p.from)!;
    await fill(after, EVENTS, week.from!.getTime(), week.to.getTime() - 2000);
    // When the week's attempts are past their retention too (the longest of the three), with
    // the weeks ahead of that time made first: the measured run only drops.
    const at = new Date(week.to.getTime() + OUTBOX_PARTITIONS[2]!.retentionMs + 60_000);
    later = at.getTime();
    await keeper.make(at);
    await after.db.execute(sql`checkpoint`);
    const admin = postgres(after.url, { ...SESSION_OPTIONS, max: 1 });
    const [wal, ms] = await walBytesOf(admin, () => keeper.run(at));
    const left = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_class where relname like ${`%_p${week.name.slice(-8)}`}`;
    await admin.end({ timeout: 5 });
    if (left[0]!.n !== 0) throw new Error(`the week of ${week.name} was not dropped`);
    result.drop = { events: EVENTS, walBytes: wal, ms: Math.round(ms) };
    console.error(`[retention:outbox] drop: ${JSON.stringify(result.drop)}`);
  }

  // 3. The write's cost per event, before and after partitioning (after: into the week of the
  // time the drop ran at, made by then; this week's went with the drop).
  result.insert = {
    usPerEventBefore: await insertCost(before, now),
    usPerEventAfter: await insertCost(after, later),
  };
  console.error(`[retention:outbox] insert: ${JSON.stringify(result.insert)}`);
  const del = result.delete as { walBytes: number };
  const drop = result.drop as { walBytes: number };
  result.walRatio = drop.walBytes / del.walBytes;
  console.log(JSON.stringify(result, null, 2));
}

try {
  await main();
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
