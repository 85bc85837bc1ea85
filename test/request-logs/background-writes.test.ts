/**
 * The request log's batches are written on a connection of their own, outside the pool
 * (docs/operations.md, "Connections"): a batch that waits (here on a lock; under load on its
 * commit's WAL flush) holds up no request. Before, a statement sent while a batch insert ran was
 * pipelined behind it on a busy pool connection and waited for it: feed pages and by-id reads
 * stalled for up to 1.8 s under a sustained mix of writes (issue #35 item 4). With a pool of one
 * connection the behaviour is deterministic: the request's statement had no other connection.
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { createServices } from '../../src/services.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';
import { loggedRequest } from '../helpers/request-logs.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const skip = !onPostgres && 'PostgreSQL only (DATABASE_URL): PGlite has no pool';

t.test('a request-log batch that waits holds up no statement of the pool', { skip }, async (t) => {
  const env = await freshDatabaseEnv(t);
  const handle = await openDatabase({
    databaseUrl: env.DATABASE_URL,
    directUrl: env.DATABASE_DIRECT_URL,
    pgliteDir: '',
    poolSize: 1,
  });
  t.teardown(() => handle.close());
  t.ok(handle.backgroundDb, 'PostgreSQL: the log has a connection of its own');
  const services = createServices(handle.db, { backgroundDb: handle.backgroundDb });
  const owner = await services.users.create({ username: 'log_owner', password: 'a long password' });
  const app = await services.apps.create({ ownerUsername: owner.username, name: 'Logged' });

  // Another session holds the request log's table: the batch insert waits for it.
  const locker = postgres(env.DATABASE_DIRECT_URL ?? env.DATABASE_URL, {
    max: 1,
    onnotice: () => {},
  });
  t.teardown(() => locker.end({ timeout: 5 }));
  let unlock!: () => void;
  const locked = new Promise<void>((resolve) => {
    const held = locker.begin(async (tx) => {
      await tx`lock table request_logs in access exclusive mode`;
      resolve();
      await new Promise<void>((release) => {
        unlock = release;
      });
    });
    t.teardown(() => held);
  });
  await locked;

  const buffer = services.requestLogs.buffer({
    capacity: 100,
    flushIntervalMs: 10,
    batchSize: 500,
  });
  buffer.record(loggedRequest({ app_id: app.id }));
  const writing = buffer.flush();
  const watcher = postgres(env.DATABASE_DIRECT_URL ?? env.DATABASE_URL, {
    max: 1,
    onnotice: () => {},
  });
  t.teardown(() => watcher.end({ timeout: 5 }));
  await waitUntil('the batch to wait on the lock', async () => {
    const [row] = await watcher<{ n: number }[]>`select count(*)::int as n from pg_locks
      where not granted and relation = 'request_logs'::regclass`;
    return row!.n > 0;
  });

  // A request's statement on the pool's one connection, while the batch waits on the lock.
  const answered = queryRows<{ one: number }>(handle.db, sql`select 1 as one`).then(() => 'yes');
  const outcome = await deadline('the pool to answer', answered, 2000).catch(() => 'held up');
  t.equal(outcome, 'yes', 'the pool answers while the batch waits');

  unlock();
  await writing;
  await buffer.close();
  const [row] = await queryRows<{ n: number }>(
    handle.db,
    sql`select count(*)::int as n from request_logs where app_id = ${app.id}`,
  );
  t.equal(row!.n, 1, 'and the batch is written once the table is free');
});
