/**
 * Issue #61, the audit log "kept for a documented time (at least a year; partitioned like the
 * request log)": drizzle/0027 makes audit_events partitioned by week at a deployment's next
 * start, no row moved (the table as it was is the partition of everything before the next
 * Monday), its pages read as before and backed by the app's index; the partition keeper makes
 * weeks ahead and drops a week once its newest entry is AUDIT_RETENTION_DAYS old (not before);
 * and the admin CLI, like the server's start, makes the current week's partition before it
 * writes, so an entry is written even when no partition held the week.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import t from 'tap';
import { AuditRepository } from '../../src/audit/audit-repository.ts';
import { auditPartitions } from '../../src/audit/audit-partitions.ts';
import { AuditService } from '../../src/audit/audit-service.ts';
import { runAdmin } from '../../src/cli/admin.ts';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/client.ts';
import { migrationsFolder } from '../../src/db/database.ts';
import { listPartitions, PartitionKeeper } from '../../src/db/partitions.ts';
import { queryRows } from '../../src/db/rows.ts';
import { UnitOfWork } from '../../src/db/unit-of-work.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { deploymentBefore } from '../helpers/migrations.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const DAY = 86_400_000;
const WEEK = 7 * DAY;
/** The migrations before drizzle/0027_audit_events_partitioned.sql, as the journal lists them. */
const BEFORE = (
  JSON.parse(readFileSync(join(migrationsFolder, 'meta/_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  }
).entries.findIndex(({ tag }) => tag.endsWith('_audit_events_partitioned'));
const ENTRIES = 2_000;

/**
 * One app's log over the last 400 days, ids time-ordered as AuditService makes them; another's
 * four times as long.
 */
const SEED = `
  insert into users (username, display_name, password_hash) values ('before_0027', 'B', 'x');
  insert into apps (owner_id, name) select id, 'before 0027' from users where username = 'before_0027';
  insert into audit_events (id, app_id, actor_type, action, target, created_at)
  select (lpad(to_hex((extract(epoch from at) * 1000)::bigint), 12, '0') || '7' ||
      substr(md5(i::text), 1, 3) || '8' || substr(md5(i::text), 4, 15))::uuid,
    a.id, 'admin_cli', 'app.renamed', 'entry-' || i, at
  from apps a, generate_series(1, ${ENTRIES}) as i,
    lateral (select now() - (i * interval '400 days' / ${ENTRIES}) as at) t
  where a.name = 'before 0027';
  insert into apps (owner_id, name) select id, 'another' from users where username = 'before_0027';
  insert into audit_events (id, app_id, actor_type, action, created_at)
  select (lpad(to_hex((extract(epoch from at) * 1000)::bigint), 12, '0') || '7' ||
      substr(md5('x' || i), 1, 3) || '8' || substr(md5('x' || i), 4, 15))::uuid,
    a.id, 'admin_cli', 'app.renamed', at
  from apps a, generate_series(1, ${4 * ENTRIES}) as i,
    lateral (select now() - (i * interval '400 days' / ${4 * ENTRIES}) as at) t
  where a.name = 'another';`;

const monday = () => {
  const today = Math.floor(Date.now() / DAY) * DAY;
  return today - ((new Date(today).getUTCDay() + 6) % 7) * DAY;
};

t.test('the audit log of a deployment becomes partitioned at its next start', async (t) => {
  const open = await deploymentBefore(t, BEFORE, SEED);
  const handle = await open();
  t.teardown(() => handle.close());
  const { db } = handle;
  const partitions = await listPartitions(db, 'audit_events');
  t.same(
    partitions.map((p) => [p.name, p.from, p.to.getTime()]),
    [['audit_events_before_partitions', null, monday() + WEEK]],
    'one partition, the table as it was, to the next Monday',
  );
  const [app] = await queryRows<{ id: string }>(
    db,
    sql`select id from apps where name = 'before 0027'`,
  );
  const audit = new AuditService(new AuditRepository(db), new UnitOfWork(db));
  const first = await audit.page(app!.id, { limit: 25 });
  t.same(
    first.entries.map((e) => e.target),
    Array.from({ length: 25 }, (_, i) => `entry-${i + 1}`),
    'every row there, the newest page as before',
  );
  const next = await audit.page(app!.id, { limit: 25, cursor: first.next_cursor! });
  t.equal(next.entries[0]!.target, 'entry-26', 'and the next page after it');

  const keeper = new PartitionKeeper(db, [auditPartitions(400)], onPostgres, { info: () => {} });
  await keeper.make();
  t.same(
    (await listPartitions(db, 'audit_events')).map((p) => p.from?.getTime() ?? null),
    [null, monday() + WEEK, monday() + 2 * WEEK],
    'two weeks made ahead',
  );
  await audit.record(app!.id, { type: 'admin_cli' }, { action: 'app.renamed', target: 'after' });
  t.equal((await audit.page(app!.id, { limit: 1 })).entries[0]!.target, 'after', 'newest first');

  // The page's plan: an index of each partition in id order (the app's, or the primary key's
  // when the app's entries are many), merged: no sort of rows, however many partitions.
  await db.execute(sql`analyze audit_events`);
  const [plan] = await queryRows<{ 'QUERY PLAN': unknown }>(
    db,
    sql`explain (format json) select * from audit_events
        where app_id = ${app!.id} and id < ${first.entries[24]!.id} order by id desc limit 51`,
  );
  const text = JSON.stringify(plan!['QUERY PLAN']);
  t.match(text, /"Node Type":"Merge Append"/, "the partitions' pages merged in id order");
  t.match(text, /"Node Type":"Index Scan"/, 'an index of each partition');
  t.notMatch(text, /"Node Type":"(Sort|Seq Scan|Bitmap Heap Scan)"/, 'no sort, no table scan');

  // A week is dropped once its newest entry is 400 days old, never before.
  const dropped: string[] = [];
  const dropper = new PartitionKeeper(db, [auditPartitions(400)], onPostgres, {
    info: (fields, message) => {
      if (message === 'partition dropped')
        dropped.push((fields as { partition: string }).partition);
    },
  });
  await dropper.run(new Date(monday() + WEEK + 399 * DAY));
  t.same(dropped, [], 'kept while its newest entry may be within 400 days');
  await dropper.run(new Date(monday() + WEEK + 400 * DAY));
  t.same(dropped, ['audit_events_before_partitions'], 'then dropped whole');
});

t.test('the admin CLI makes the current week before it writes an entry', async (t) => {
  const database = await freshDatabaseEnv(t);
  let env: Record<string, string> = { NODE_ENV: 'test', ...database };
  if (database.DATABASE_URL === 'memory://') {
    const parent = mkdtempSync(join(tmpdir(), 'audit-cli-'));
    t.teardown(() => rmSync(parent, { recursive: true, force: true }));
    env = { NODE_ENV: 'test', PGLITE_DIR: join(parent, 'db') };
  }
  const admin = async (...argv: string[]) => {
    const res = await runAdmin(argv, { ...env, USER_PASSWORD: 'a long password 1' });
    t.equal(res.code, 0, `${argv.slice(0, 2).join(' ')}: ${res.stderr}`);
    return JSON.parse(res.stdout || '{}') as Record<string, string>;
  };
  await admin('user', 'create', '--username', 'weeks');
  const { id: appId } = await admin('app', 'create', '--owner', 'weeks', '--name', 'Weeks');
  const config = loadConfig(env);
  const reopen = () =>
    openDatabase({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir, poolSize: 1 });

  // No partition holds this week (as after weeks without a server or a CLI run).
  let handle = await reopen();
  for (const { name } of await listPartitions(handle.db, 'audit_events'))
    await handle.db.execute(sql.raw(`alter table audit_events detach partition "${name}"`));
  const insert = sql`insert into audit_events (id, app_id, actor_type, action)
    values (gen_random_uuid(), ${appId}, 'admin_cli', 'app.renamed')`;
  const failed = await handle.db.execute(insert).then(
    () => null,
    (err: Error) => String((err.cause as Error | undefined)?.message ?? err.message),
  );
  t.match(failed, /no partition of relation "audit_events"/, 'an insert now has no partition');
  await handle.close();

  await admin('app', 'rename', '--app', appId!, '--name', 'Weeks again');
  handle = await reopen();
  t.teardown(() => handle.close());
  const week = (await listPartitions(handle.db, 'audit_events')).map((p) => p.from?.getTime());
  t.same(week, [monday(), monday() + WEEK, monday() + 2 * WEEK], 'this week and two ahead');
  const rows = await queryRows<{ action: string }>(
    handle.db,
    sql`select action from audit_events where app_id = ${appId}`,
  );
  t.same(rows, [{ action: 'app.renamed' }], 'the rename recorded');
});
