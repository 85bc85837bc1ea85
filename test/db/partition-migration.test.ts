/**
 * Issue #45 item 3: an existing deployment's request log becomes partitioned by its next start
 * (drizzle/0015), on either database: no row moves (the table as it was becomes the partition
 * of everything before the next UTC midnight), every row stays readable, an id from before is
 * still found, and the rows from before go whole once the newest of them is 14 days old. Here
 * at ROWS rows, spread over the last 16 days; `npm run bench:retention` times it at a million
 * (docs/operations.md).
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { queryRows } from '../../src/db/rows.ts';
import {
  REQUEST_LOG_PARTITIONS,
  RequestLogsRepository,
} from '../../src/request-logs/request-logs-repository.ts';
import { deploymentBefore } from '../helpers/migrations.ts';

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

t.test('the request log of a deployment becomes partitioned at its next start', async (t) => {
  const open = await deploymentBefore(t, BEFORE, SEED);
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
