/**
 * The request log's retention and migration at volume (issue #45; docs/scaling.md, partitions;
 * docs/operations.md): on databases of their own (dropped at the end), with `--rows` request-log
 * rows a day (default 1,000,000: a day at about 12 logged requests a second; WAL and time of a
 * DELETE grow with the rows, a DROP's do not, so the report scales the DELETE to 1,000 a second):
 *
 *  1. migrate: a database at the migration before partitioning, holding `--rows` rows over the
 *     last 14 days, migrated (drizzle/0015) while a writer inserts a batch of the log every
 *     50 ms as the buffer does: the migration's time and the longest insert meanwhile;
 *  2. delete: the retention as it was before partitioning (batches of 5,000 oldest rows deleted
 *     until none is past 14 days) removing a day of `--rows` rows: WAL, time, longest insert;
 *  3. drop: the partitioned log's retention (src/db/partitions.ts) removing a day partition of
 *     `--rows` rows: WAL, time, longest insert (a DETACH ... CONCURRENTLY, then DROP TABLE);
 *  4. insert: the log's write statement (RequestLogsRepository.insertMany, batches of 500) into
 *     the table before and after partitioning: time per logged request, median of 5 rounds.
 *
 *   DATABASE_URL=postgres://... npm run bench:retention [-- --rows 1000000]
 *
 * WAL is the cluster's: run it on a PostgreSQL nothing else writes to meanwhile. Prints one JSON
 * object.
 */
import { parseArgs } from 'node:util';
import postgres, { type Sql } from 'postgres';
import { openDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrations.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { connectionDb, SESSION_OPTIONS } from '../../src/db/postgres.ts';
import { uuidV7 } from '../../src/lib/uuid-v7.ts';
import {
  REQUEST_LOG_PARTITIONS,
  RequestLogsRepository,
  type RequestLogEntry,
} from '../../src/request-logs/request-logs-repository.ts';
// The same folder of the migrations before partitioning the tests start from.
import { migrationsBefore } from '../../test/helpers/migrations.ts';
import { createBenchDatabase } from './seed.ts';
import { walBytesOf } from './wal.ts';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '1000000' } } });
const ROWS = Number(values.rows);
const DAY = 86_400_000;
/** drizzle/0015_partitioned_request_log.sql is the 16th. */
const BEFORE_PARTITIONING = 15;
/** A day's log at 1,000 logged requests a second. */
const DAY_AT_1000 = 86_400_000;

const serverUrl = process.env.DATABASE_URL;
if (!serverUrl?.startsWith('postgres')) {
  console.error('DATABASE_URL must name a PostgreSQL server (databases of its own are made)');
  process.exit(1);
}

const cleanups: (() => void | Promise<void>)[] = [];
const scope = { teardown: (fn: () => void) => cleanups.push(fn) };

/** A database at the migration before partitioning, its one app's id. */
async function beforePartitioning(): Promise<{ url: string; sql: Sql; appId: string }> {
  const database = await createBenchDatabase(serverUrl!);
  cleanups.push(() => database.drop());
  await migrate(database.url, SESSION_OPTIONS, migrationsBefore(scope, BEFORE_PARTITIONING));
  const sql = postgres(database.url, { ...SESSION_OPTIONS, max: 2 });
  cleanups.push(() => sql.end({ timeout: 5 }));
  await sql.unsafe(`
    insert into users (username, display_name, password_hash) values ('retention', 'R', 'x');
    insert into apps (owner_id, name) select id, 'retention' from users`);
  const [app] = await sql<{ id: string }[]>`select id from apps`;
  return { url: database.url, sql, appId: app!.id };
}

/** `rows` logged requests between `from` and `to` (ms), as the buffer writes them. */
async function fill(sql: Sql, appId: string, rows: number, from: number, to: number) {
  await sql`
    insert into request_logs (app_id, environment, created_at, method, path, status, latency_ms,
      request_id, rate_limit)
    select ${appId}::uuid, 'sandbox',
      to_timestamp(${from / 1000}::float8 + ${(to - from) / 1000}::float8 * i / ${rows}::float8),
      'GET', '/api/v1/listings?limit=24', 200, 12, 'req-' || i,
      '{"limit":600,"remaining":599,"reset":60}'
    from generate_series(0, ${rows - 1}) as i`;
  await sql`analyze request_logs`;
}

/** A logged GET /api/v1/listings at `time` (ms), as the buffer writes it. */
function logged(
  appId: string,
  time: number,
  requestId: string,
  rateLimit: string | null,
): RequestLogEntry {
  return {
    id: uuidV7(time),
    app_id: appId,
    environment: 'sandbox',
    created_at: new Date(time).toISOString(),
    method: 'GET',
    path: '/api/v1/listings',
    status: 200,
    error_code: null,
    error_message: null,
    error_details: null,
    latency_ms: 3,
    request_id: requestId,
    key_id: null,
    user_id: null,
    rate_limit: rateLimit,
  };
}

/**
 * A writer of the log while `work` runs: a batch of 25 entries every 50 ms (about 500 logged
 * requests a second), timed each; returns the longest wait for one and how many were written.
 */
async function whileWriting(
  db: DatabaseHandle['db'],
  appId: string,
  at: () => number,
  work: () => Promise<unknown>,
): Promise<{ longestInsertMs: number; batches: number }> {
  const logs = new RequestLogsRepository(db);
  let done = false;
  let longest = 0;
  let batches = 0;
  const writer = (async () => {
    while (!done) {
      const time = at();
      const entries = Array.from({ length: 25 }, (_, i) =>
        logged(appId, time + i, `w-${time}-${i}`, null),
      );
      const started = performance.now();
      await logs.insertMany(JSON.stringify(entries));
      longest = Math.max(longest, performance.now() - started);
      batches += 1;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  try {
    await work();
  } finally {
    done = true;
    await writer;
  }
  return { longestInsertMs: Math.round(longest), batches };
}

/** The retention before partitioning, as src/request-logs/request-logs-repository.ts ran it. */
async function deleteAsBefore(sql: Sql): Promise<number> {
  let deleted = 0;
  for (;;) {
    const rows = await sql`delete from request_logs where id in (
      select id from request_logs where created_at < now() - interval '14 days' limit 5000)
      returning id`;
    deleted += rows.length;
    if (rows.length === 0) return deleted;
  }
}

async function insertCost(db: DatabaseHandle['db'], appId: string): Promise<number> {
  const logs = new RequestLogsRepository(db);
  const rounds: number[] = [];
  for (let round = 0; round < 5; round += 1) {
    const batches = 40;
    const started = performance.now();
    for (let b = 0; b < batches; b += 1) {
      const time = Date.now();
      const entries = Array.from({ length: 500 }, (_, i) =>
        logged(appId, time, `i-${round}-${b}-${i}`, '{"limit":600,"remaining":599,"reset":60}'),
      );
      await logs.insertMany(JSON.stringify(entries));
    }
    rounds.push(((performance.now() - started) * 1000) / (batches * 500));
  }
  rounds.sort((a, b) => a - b);
  return Math.round(rounds[2]! * 10) / 10;
}

async function main(): Promise<void> {
  const now = Date.now();
  const result: Record<string, unknown> = { at: new Date(now).toISOString(), rows: ROWS };

  // 1. The migration of a deployment holding ROWS rows over the last 14 days.
  {
    const before = await beforePartitioning();
    await fill(before.sql, before.appId, ROWS, now - 14 * DAY, now);
    // The writer runs on a connection of its own, opened before the migration (which the
    // second open runs): as the instances that keep serving while one restarts.
    const writerDb = postgres(before.url, { ...SESSION_OPTIONS, max: 1 });
    cleanups.push(() => writerDb.end({ timeout: 5 }));
    let migrateMs = 0;
    const writes = await whileWriting(
      connectionDb(writerDb),
      before.appId,
      () => Date.now(),
      async () => {
        const started = performance.now();
        const handle = await openDatabase({ databaseUrl: before.url, pgliteDir: '', poolSize: 2 });
        migrateMs = performance.now() - started;
        await handle.close();
      },
    );
    result.migrate = { rows: ROWS, ms: Math.round(migrateMs), ...writes };
    console.error(`[retention] migrate: ${JSON.stringify(result.migrate)}`);
  }

  // 2. The DELETE of a day of ROWS rows, before partitioning.
  let insertBefore = 0;
  {
    const before = await beforePartitioning();
    await fill(before.sql, before.appId, ROWS, now - 16 * DAY, now - 15 * DAY);
    await fill(before.sql, before.appId, ROWS / 10, now - DAY, now);
    await before.sql`checkpoint`;
    const handle = await openDatabase({ databaseUrl: before.url, pgliteDir: '', poolSize: 2 });
    let wal = 0;
    let ms = 0;
    let deleted = 0;
    const writes = await whileWriting(
      handle.db,
      before.appId,
      () => Date.now(),
      async () => {
        [wal, ms] = await walBytesOf(before.sql, async () => {
          deleted = await deleteAsBefore(before.sql);
        });
      },
    );
    result.delete = { rows: deleted, walBytes: wal, ms: Math.round(ms), ...writes };
    console.error(`[retention] delete: ${JSON.stringify(result.delete)}`);
    await handle.close();
  }

  // 3. The DROP of a day partition of ROWS rows, and 4. the write's cost before and after.
  {
    const before = await beforePartitioning();
    // The write's cost on the table as it was, before the migration runs.
    const writer = postgres(before.url, { ...SESSION_OPTIONS, max: 1 });
    insertBefore = await insertCost(connectionDb(writer), before.appId);
    await writer.end({ timeout: 5 });
    const handle = await openDatabase({ databaseUrl: before.url, pgliteDir: '', poolSize: 3 });
    cleanups.push(() => handle.close());
    const insertAfter = await insertCost(handle.db, before.appId);
    result.insert = {
      usPerLoggedRequestBefore: insertBefore,
      usPerLoggedRequestAfter: insertAfter,
    };
    console.error(`[retention] insert: ${JSON.stringify(result.insert)}`);

    const keeper = new PartitionKeeper(handle.db, [REQUEST_LOG_PARTITIONS], true, {
      info: () => {},
    });
    await keeper.make();
    const partitions = await listPartitions(handle.db, 'request_logs');
    const day = partitions[1]!;
    const last = partitions[partitions.length - 1]!;
    await fill(before.sql, before.appId, ROWS, day.from!.getTime(), day.to.getTime() - 1);
    await before.sql`checkpoint`;
    let wal = 0;
    let ms = 0;
    const writes = await whileWriting(
      handle.db,
      before.appId,
      // Into the last day made, which stays.
      () => last.from!.getTime() + Math.floor(Math.random() * (DAY - 100)),
      async () => {
        [wal, ms] = await walBytesOf(before.sql, () =>
          keeper.run(new Date(day.to.getTime() + REQUEST_LOG_PARTITIONS.retentionMs)),
        );
      },
    );
    const [left] = await before.sql<{ n: number }[]>`
      select count(*)::int as n from pg_class where relname = ${day.name}`;
    if (left!.n !== 0) throw new Error(`${day.name} was not dropped`);
    result.drop = { rows: ROWS, walBytes: wal, ms: Math.round(ms), ...writes };
    console.error(`[retention] drop: ${JSON.stringify(result.drop)}`);
  }

  const del = result.delete as { rows: number; walBytes: number; ms: number };
  const drop = result.drop as { walBytes: number; ms: number };
  // A DELETE's WAL and time grow with its rows; a DROP's do not (it writes the catalog's rows).
  const scale = DAY_AT_1000 / del.rows;
  result.at1000PerSecond = {
    deleteWalBytes: Math.round(del.walBytes * scale),
    deleteSeconds: Math.round((del.ms * scale) / 1000),
    dropWalBytes: drop.walBytes,
    dropMs: drop.ms,
    walRatio: drop.walBytes / (del.walBytes * scale),
  };
  console.log(JSON.stringify(result, null, 2));
}

try {
  await main();
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
