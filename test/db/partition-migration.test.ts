/**
 * Issue #45 item 3: an existing deployment's request log becomes partitioned by its next start
 * (drizzle/0015), on either database: no row moves (the table as it was becomes the partition
 * of everything before the next UTC midnight), every row stays readable, an id from before is
 * still found, and the rows from before go whole once the newest of them is 14 days old. Here
 * at ROWS rows, spread over the last 16 days; `npm run bench:retention` times it at a million
 * (docs/operations.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { openDatabase, type DatabaseHandle } from '../../src/db/client.ts';
import { migrate } from '../../src/db/migrations.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { SESSION_OPTIONS } from '../../src/db/postgres.ts';
import { queryRows } from '../../src/db/rows.ts';
import {
  REQUEST_LOG_PARTITIONS,
  RequestLogsRepository,
} from '../../src/request-logs/request-logs-repository.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { migrationsBefore } from '../helpers/migrations.ts';

const ROWS = 20_000;
const DAY = 86_400_000;
/** The migrations before drizzle/0015_partitioned_request_log.sql. */
const BEFORE = 15;
const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

/** The rows an existing deployment holds: one app's requests over the last 16 days. */
const SEED = `
  insert into users (username, display_name, password_hash) values ('before_0015', 'B', 'x');
  insert into apps (owner_id, name) select id, 'before 0015' from users where username = 'before_0015';
  insert into request_logs (app_id, environment, created_at, method, path, status, latency_ms, request_id)
  select a.id, 'sandbox', now() - (i * interval '16 days' / ${ROWS}), 'GET', '/api/v1/listings', 200, 1,
    'before-' || i
  from apps a, generate_series(1, ${ROWS}) as i where a.name = 'before 0015';`;

/** Opens the database at the migration before partitioning, seeded; the returned one migrates. */
async function deployment(t: Test): Promise<() => Promise<DatabaseHandle>> {
  const folder = migrationsBefore(t, BEFORE);
  if (onPostgres) {
    const url = await freshDatabaseUrl(t);
    await migrate(url, SESSION_OPTIONS, folder);
    const postgres = (await import('postgres')).default;
    const seeding = postgres(url, { ...SESSION_OPTIONS, max: 1 });
    await seeding.unsafe(SEED);
    await seeding.end();
    return () => openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  }
  const dir = mkdtempSync(join(tmpdir(), 'pglite-before-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const [{ PGlite }, { drizzle }, { migrate: migratePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
  ]);
  const client = await PGlite.create({ dataDir: dir });
  await client.exec("set time zone 'UTC'");
  await migratePglite(drizzle({ client }), { migrationsFolder: folder });
  await client.exec(SEED);
  await client.close();
  return () => openDatabase({ databaseUrl: undefined, pgliteDir: dir });
}

t.test('the request log of a deployment becomes partitioned at its next start', async (t) => {
  const open = await deployment(t);
  const started = performance.now();
  const handle = await open();
  t.teardown(() => handle.close());
  const took = performance.now() - started;
  t.comment(`migrated ${ROWS} request log rows in ${took.toFixed(0)} ms (start included)`);
  const { db } = handle;

  const partitions = await listPartitions(db, 'request_logs');
  t.equal(partitions.length, 1, 'one partition: the table as it was');
  t.equal(partitions[0]!.name, 'request_logs_before_partitions');
  const today = Math.floor(Date.now() / DAY) * DAY;
  t.equal(partitions[0]!.to.getTime(), today + DAY, 'reaching to the next UTC midnight');

  const [count] = await queryRows<{ n: number }>(
    db,
    sql`select count(*)::int as n from request_logs`,
  );
  t.equal(count!.n, ROWS, 'every row is there, none moved');

  const [app] = await queryRows<{ id: string }>(
    db,
    sql`select id from apps where name = 'before 0015'`,
  );
  const logs = new RequestLogsRepository(db);
  const page = await logs.page({ appId: app!.id, environment: 'sandbox' }, 25);
  t.equal(page.length, 26, 'the newest page reads as before');
  t.equal(page[0]!.request_id, 'before-1', 'newest first');
  const [old] = await queryRows<{ id: string }>(
    db,
    sql`select id::text from request_logs where request_id = 'before-2'`,
  );
  t.equal(
    (await logs.find(app!.id, old!.id))?.request_id,
    'before-2',
    'an id from before is found',
  );

  // The server's start makes the days ahead; then, new requests land in their day's partition.
  const lines: string[] = [];
  const keeper = new PartitionKeeper(db, [REQUEST_LOG_PARTITIONS], onPostgres, {
    info: (fields, message) =>
      lines.push(`${message} ${(fields as { partition: string }).partition}`),
  });
  await keeper.make();
  t.equal(lines.length, REQUEST_LOG_PARTITIONS.ahead, 'the days ahead made');
  // Thirteen days on, the rows from before still hold requests within the 14 days: kept.
  await keeper.run(new Date(today + 13 * DAY));
  t.notOk(
    lines.some((l) => l === 'partition dropped request_logs_before_partitions'),
    'kept while its newest request may be within the retention',
  );
  await keeper.run(new Date(today + DAY + REQUEST_LOG_PARTITIONS.retentionMs));
  t.ok(
    lines.includes('partition dropped request_logs_before_partitions'),
    'dropped whole once its newest possible request is 14 days old',
  );
});
