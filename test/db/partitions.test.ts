/**
 * The request log partitioned by day (issue #45; src/db/partitions.ts, drizzle/0015): made ahead
 * at start, read one partition at a time, paged exactly once across a partition boundary, and
 * kept by dropping whole days, on both databases; on PostgreSQL, the drop is a DETACH ...
 * CONCURRENTLY that inserts never wait for, and one interrupted is finished by the next run.
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import t from 'tap';
import type { Db } from '../../src/db/client.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { queryRows } from '../../src/db/rows.ts';
import {
  REQUEST_LOG_PARTITIONS,
  RequestLogsRepository,
} from '../../src/request-logs/request-logs-repository.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { explaining, planText } from '../helpers/explaining.ts';
import { loggedRequest } from '../helpers/request-logs.ts';
import { waitUntil } from '../helpers/wait.ts';

const DAY = 86_400_000;
const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

const app = await buildTestApp(t, { WEBHOOK_WORKER: 'false' });
const { appId } = await createDeveloper(app);
const logs = new RequestLogsRepository(app.db);
const today = Math.floor(Date.now() / DAY) * DAY;
const iso = (ms: number) => new Date(ms).toISOString();

/** A keeper over the request log, its log lines kept. */
function keeper(lines: string[]) {
  return new PartitionKeeper(app.db, [REQUEST_LOG_PARTITIONS], onPostgres, {
    info: (fields, message) =>
      lines.push(`${message} ${(fields as { partition: string }).partition}`),
  });
}

/** Logged requests at `times`, written as the buffer writes them (UUIDv7 ids of their time). */
async function logAt(times: number[], path = '/api/v1/listings'): Promise<string[]> {
  const entries = times.map((at) => loggedRequest({ app_id: appId, created_at: iso(at), path }));
  await logs.insertMany(JSON.stringify(entries));
  return entries.map((e) => e.id);
}

t.test('at start: the rows from before partitioning, then a day each, three ahead', async (t) => {
  const partitions = await listPartitions(app.db, 'request_logs');
  t.equal(partitions[0]!.name, 'request_logs_before_partitions');
  t.equal(partitions[0]!.from, null, 'from MINVALUE');
  t.equal(partitions[0]!.to.getTime(), today + DAY, 'to the next UTC midnight');
  t.same(
    partitions.slice(1).map((p) => [p.name, iso(p.from!.getTime()), iso(p.to.getTime())]),
    [1, 2, 3].map((d) => [
      `request_logs_p${iso(today + d * DAY)
        .slice(0, 10)
        .replace(/-/g, '')}`,
      iso(today + d * DAY),
      iso(today + (d + 1) * DAY),
    ]),
    'the next three days, each its own partition, no gap',
  );
  const lines: string[] = [];
  await keeper(lines).make();
  t.same(lines, [], 'a second run makes nothing twice');
});

t.test('a page spanning two partitions, exactly once; a lookup by id reads one', async (t) => {
  const midnight = today + 3 * DAY;
  // Five requests either side of a partition boundary, plus one the same millisecond.
  const times = [-5, -4, -3, -2, -1, 0, 0, 1, 2, 3, 4].map((ms) => midnight + ms);
  const ids = await logAt(times, '/api/v1/boundary');
  const seen: string[] = [];
  let cursor: { createdAt: string; id: string } | undefined;
  for (;;) {
    const rows = await logs.page(
      { appId, environment: 'sandbox', pathPrefix: '/api/v1/boundary' },
      3,
      cursor,
    );
    seen.push(...rows.slice(0, 3).map((r) => r.id));
    if (rows.length <= 3) break;
    const last = rows[2]!;
    cursor = { createdAt: last.created_at, id: last.id };
  }
  t.equal(seen.length, ids.length, 'as many rows as logged');
  t.same([...seen].sort(), [...ids].sort(), 'each logged request once');

  for (const [label, id] of [
    ['before midnight', ids[4]!],
    ['after midnight', ids[7]!],
  ] as const) {
    const found = await logs.find(appId, id);
    t.equal(found?.id, id, `${label}: found by id`);
    const plan = await explain((db) => new RequestLogsRepository(db).find(appId, id));
    const scanned = [
      ...plan.matchAll(/Scan (?:Backward )?(?:using \S+ )?on (request_logs\w*)/g),
    ].map((m) => m[1]);
    t.same(
      scanned,
      [
        `request_logs_p${iso(midnight - (label === 'before midnight' ? DAY : 0))
          .slice(0, 10)
          .replace(/-/g, '')}`,
      ],
      `${label}: one partition read, the one of its time`,
      { plan },
    );
  }

  // A thousand requests a day in each partition, unanalyzed (as the day's partition is until
  // someone analyzes it): the first page reads the newest day only.
  await app.db.execute(sql`
    insert into request_logs (id, app_id, environment, created_at, method, path, status,
      latency_ms, request_id)
    select gen_random_uuid(), ${appId}::uuid, 'sandbox',
      ${iso(today)}::timestamptz + (i * interval '1 day' / 1000), 'GET', '/api/v1/bulk', 200, 1,
      'bulk-' || i
    from generate_series(0, 3999) as i`);
  const page = await explain((db) =>
    new RequestLogsRepository(db).page({ appId, environment: 'sandbox' }, 25),
  );
  const reads = [
    ...page.matchAll(
      /Scan[^\n]* on (request_logs_\w+) [^\n]*?(?:rows=([\d.]+) loops=1|never executed)/g,
    ),
  ].map((m) => [m[1]!, Number(m[2] ?? 0)] as const);
  t.ok(reads.length >= 4, 'each partition within the retention is planned for', { page });
  const newest = reads.reduce((a, b) => (a[0] > b[0] ? a : b));
  t.ok(newest[1] <= 27, `the newest day: the page's rows (${newest[1]})`, { page });
  for (const [partition, rows] of reads.filter((r) => r !== newest))
    t.ok(rows <= 1, `${partition}: ${rows} row(s) read, not its thousand`, { page });
});

t.test('retention drops whole days across the boundary, and nothing newer', async (t) => {
  const day = today + 2 * DAY;
  const ids = await logAt([day + DAY - 1, day + DAY], '/api/v1/retention');
  const lines: string[] = [];
  // As the hourly run would see it 14 days after the first of them.
  const at = new Date(day + DAY + REQUEST_LOG_PARTITIONS.retentionMs + 60_000);
  t.equal(await keeper(lines).run(at), true, 'the run held the lease');
  const dropped = lines
    .filter((l) => l.startsWith('partition dropped'))
    .map((l) => l.split(' ')[2]);
  t.same(
    dropped,
    [
      'request_logs_before_partitions',
      ...[1, 2].map(
        (d) =>
          `request_logs_p${iso(today + d * DAY)
            .slice(0, 10)
            .replace(/-/g, '')}`,
      ),
    ],
    'the days wholly past retention went, a log line each',
  );
  t.ok(
    lines.some((l) => l.startsWith('partition made')),
    'and the days ahead of that time were made',
  );
  const left = await queryRows<{ id: string }>(
    app.db,
    sql`select id from request_logs where path = '/api/v1/retention'`,
  );
  t.same(
    left.map((r) => r.id),
    [ids[1]],
    'the request of the day past retention went, the one a millisecond later stays',
  );
  const tables = await queryRows<{ n: number }>(
    app.db,
    sql`select count(*)::int as n from pg_class where relname = 'request_logs_before_partitions'`,
  );
  t.equal(tables[0]!.n, 0, 'a dropped partition is gone, not detached and kept');
});

t.test(
  'a partition detached but not dropped (the run cut off between) goes next run',
  async (t) => {
    const [oldest] = await listPartitions(app.db, 'request_logs');
    if (!oldest) throw new Error('no partition left');
    await app.db.execute(sql.raw(`alter table request_logs detach partition "${oldest.name}"`));
    const unrelated = 'request_logs_pending_review';
    await app.db.execute(sql.raw(`create table "${unrelated}" (id int)`));
    const lines: string[] = [];
    const at = new Date(oldest.to.getTime() + REQUEST_LOG_PARTITIONS.retentionMs + 60_000);
    t.equal(await keeper(lines).run(at), true, 'the run held the lease');
    t.ok(lines.includes(`partition dropped ${oldest.name}`), 'the detached table went, logged');
    const tables = await queryRows<{ name: string }>(
      app.db,
      sql`select relname as name from pg_class where relname in (${oldest.name}, ${unrelated})`,
    );
    t.same(
      tables.map((r) => r.name),
      [unrelated],
      'gone; a table that only resembles a partition is left alone',
    );
  },
);

t.test('one instance at a time: a lease held elsewhere leaves the run to its holder', async (t) => {
  const lines: string[] = [];
  await app.db.execute(
    sql`update maintenance_leases set holder = 'another instance', expires_at = now() + interval '1 minute'`,
  );
  await app.db.execute(
    sql`insert into maintenance_leases (name, holder, expires_at)
        values ('partitions', 'another instance', now() + interval '1 minute')
        on conflict (name) do update set holder = excluded.holder, expires_at = excluded.expires_at`,
  );
  t.equal(await keeper(lines).run(new Date(today + 60 * DAY)), false, 'not this one');
  t.same(lines, [], 'nothing made or dropped');
  await app.db.execute(sql`update maintenance_leases set expires_at = now() - interval '1 second'`);
  t.equal(await keeper(lines).run(), true, 'a lapsed lease is taken');
});

t.test(
  'DETACH ... CONCURRENTLY: inserts never wait on it; one interrupted is finished next run',
  { skip: !onPostgres && 'PostgreSQL only: PGlite has one connection and detaches plainly' },
  async (t) => {
    // Connections of their own to the test app's database (buildTestApp made a fresh one).
    const [{ name } = { name: '' }] = await queryRows<{ name: string }>(
      app.db,
      sql`select current_database() as name`,
    );
    const url = new URL(process.env.DATABASE_DIRECT_URL || process.env.DATABASE_URL!);
    url.pathname = `/${name}`;
    const open = (options: postgres.Options<{}> = {}) => {
      const sql = postgres(url.toString(), { max: 1, onnotice: () => {}, ...options });
      t.teardown(() => sql.end({ timeout: 5 }));
      return sql;
    };
    const reader = open();
    const observer = open();
    const pending = async (partition: string) => {
      const [row] = await observer<{ pending: boolean }[]>`
        select i.inhdetachpending as pending from pg_inherits i
        join pg_class c on c.oid = i.inhrelid where c.relname = ${partition}`;
      return row?.pending;
    };
    /** A reader holding a snapshot that may see every partition, until release() runs. */
    async function holdSnapshot(): Promise<{ release: () => Promise<void> }> {
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let reading!: () => void;
      const read = new Promise<void>((resolve) => {
        reading = resolve;
      });
      const transaction = reader.begin('isolation level repeatable read', async (tx) => {
        await tx`select count(*) from request_logs`;
        reading();
        await held;
      });
      await read;
      return {
        release: async () => {
          release();
          await transaction;
        },
      };
    }

    const partitions = await listPartitions(app.db, 'request_logs');
    const oldest = partitions[0]!;
    const newest = partitions[partitions.length - 1]!;
    const snapshot = await holdSnapshot();
    const lines: string[] = [];
    const run = keeper(lines).run(
      new Date(oldest.to.getTime() + REQUEST_LOG_PARTITIONS.retentionMs + 60_000),
    );
    await waitUntil('the detach to wait on the reader', () => pending(oldest.name));
    // While it waits: a write of the log (to a partition that stays) answers.
    await logAt([newest.from!.getTime() + 1], '/api/v1/while-detaching');
    const [{ n } = { n: 0 }] = await queryRows<{ n: number }>(
      app.db,
      sql`select count(*)::int as n from request_logs where path = '/api/v1/while-detaching'`,
    );
    t.equal(n, 1, 'an insert during the detach committed without waiting for it');
    t.same(
      lines.filter((l) => l.startsWith('partition dropped')),
      [],
      'still detaching',
    );
    await snapshot.release();
    t.equal(await run, true);
    t.ok(lines.includes(`partition dropped ${oldest.name}`), 'dropped once the reader ended');

    // Interrupted: a detach cancelled while it waits leaves its partition "detach pending".
    const next = (await listPartitions(app.db, 'request_logs'))[0]!;
    const again = await holdSnapshot();
    const impatient = open({ connection: { statement_timeout: 300 } });
    const cancelled = await impatient
      .unsafe(`alter table request_logs detach partition "${next.name}" concurrently`)
      .then(
        () => null,
        (err: unknown) => err,
      );
    t.match(cancelled, { code: '57014' }, 'the detach was cancelled');
    await again.release();
    t.equal(await pending(next.name), true, 'left detach pending');
    const lines2: string[] = [];
    await keeper(lines2).run(
      new Date(next.to.getTime() + REQUEST_LOG_PARTITIONS.retentionMs + 60_000),
    );
    t.ok(lines2.includes(`partition dropped ${next.name}`), 'finished and dropped by the next run');
  },
);

class RollBack extends Error {}

/** The plan (EXPLAIN ANALYZE) of what `run` sends, in a transaction rolled back. */
async function explain(run: (db: typeof app.db) => Promise<unknown>): Promise<string> {
  let plan = '';
  await app.db
    .transaction(async (tx) => {
      const explained = explaining(tx, 'explain analyze');
      const plans: string[] = [];
      // The plan of each statement, whatever the repository makes of the rows it gets back.
      await run({
        execute: async (query: Parameters<Db['execute']>[0]) => {
          const result = await explained.execute(query);
          plans.push(planText(result));
          return result;
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
