/**
 * patches/postgres+3.4.9.patch (applied by patch-package, the `postinstall` of `npm install` and
 * `npm ci`; patches/README.md): postgres.js must not crash the process when a connection's
 * backend goes away (porsager/postgres#1208), and its queues must not grow by a slot per query.
 * The installed builds carry every hunk; the patch is for the exact version installed and pinned;
 * the upstream reproduction (a query on a reserved connection whose backend was terminated)
 * rejects with CONNECTION_CLOSED instead of throwing an uncaught TypeError. On the unpatched
 * driver (`npx patch-package --reverse`) these tests fail.
 *
 * Through a failover (issue #60): a server that accepts a connection and closes it before
 * answering (HAProxy with no healthy backend) fails the waiting query at once and the next
 * attempts back off, where upstream retries at once for ever and the query never settles
 * (porsager/postgres#1193); a backend terminated during a query (57P01: pg_terminate_backend, a
 * shutdown, a failover) leaves nothing for the next connection's first query, where upstream
 * hands it the dead backend's error. Both fail on the unpatched driver.
 */
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { SESSION_OPTIONS } from '../../src/db/postgres.ts';
import t from 'tap';
import { privateServersMissing, startPrivatePostgres } from '../helpers/private-servers.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';

const root = join(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');
const project = fileURLToPath(new URL('../../', import.meta.url));
const PATCH = 'patches/postgres+3.4.9.patch';

t.test('the installed postgres.js builds carry every hunk of the patch', async (t) => {
  const installed = (
    JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  const wanted = (
    JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    }
  ).dependencies.postgres;
  // patch-package applies a patch only to the version in its name: a range in package.json
  // would let an install pick a release the patch was not written for.
  t.equal(wanted, '3.4.9', 'package.json pins the exact version the patch is for');
  t.equal(installed, '3.4.9', 'the installed version');
  const patch = readFileSync(join(project, PATCH), 'utf8');
  const hunks: Record<string, [number, string]> = {
    'connection.js': [
      14,
      'the guard, both resets, the close, the type fetch, the clean close at startup, the reset',
    ],
    'queue.js': [2, "remove from the queue's front, holes dropped"],
  };
  for (const build of ['src', 'cjs/src', 'cf/src']) {
    for (const [name, [times, what]] of Object.entries(hunks)) {
      const file = `${build}/${name}`;
      t.match(patch, `diff --git a/node_modules/postgres/${file} `, `${PATCH} patches ${file}`);
      const source = readFileSync(join(root, file), 'utf8');
      t.equal(source.split(`/* ${PATCH} */`).length - 1, times, `${file}: ${what}`);
    }
  }
});

t.test("the pool's queues: each move searches the queue, not every slot it ever had", async (t) => {
  // postgres.js moves a connection between queues on every query: shift() from one, remove()
  // (which finds nothing once shifted) and push() onto the next. What remove() searches is read
  // from Array.prototype.indexOf, the only search it makes.
  const { default: Queue } = (await import(pathToFileURL(join(root, 'src', 'queue.js')).href)) as {
    default: <T>() => QueueOf<T>;
  };
  const busy = Queue<object>();
  const connections = Array.from({ length: 10 }, () => ({}));
  for (const c of connections) busy.push(c);
  const indexOf = Array.prototype.indexOf;
  let widest = 0;
  let found = 0;
  Array.prototype.indexOf = function (this: unknown[], item: unknown, from = 0) {
    widest = Math.max(widest, this.length - from);
    return indexOf.call(this, item, from);
  };
  try {
    for (let query = 0; query < 100_000; query += 1) {
      const c = busy.shift()!;
      if (busy.remove(c) !== null) found += 1;
      busy.push(c);
    }
  } finally {
    Array.prototype.indexOf = indexOf;
  }
  t.equal(found, 0, 'a shifted connection is no longer in the queue');
  t.ok(widest <= 10, `remove() searched at most ${widest} slots (upstream: ~100,000)`);
  t.equal(busy.length, 10);
  const order = Array.from({ length: 10 }, () => busy.shift());
  t.same(new Set(order), new Set(connections), 'the same ten connections, each once');
  const [first, second, third] = connections;
  busy.push(first!);
  busy.push(second!);
  busy.push(third!);
  t.equal(busy.remove(second!), second, 'a queued connection is removed from the middle');
  t.same([busy.shift(), busy.shift(), busy.length], [first, third, 0], 'order kept');
});

interface QueueOf<T> {
  readonly length: number;
  push(x: T): T;
  shift(): T | undefined;
  remove(x: T): T | null;
}

const missing = privateServersMissing();
t.test(
  'a query on a connection whose backend died rejects instead of crashing',
  { skip: missing ?? false },
  async (t) => {
    const pg = await startPrivatePostgres(t);
    const sql = postgres(pg.url, { max: 2, onnotice: () => {} });
    const killer = postgres(pg.url, { max: 1, onnotice: () => {} });
    t.teardown(() => Promise.all([sql.end({ timeout: 1 }), killer.end({ timeout: 1 })]));
    const reserved = await sql.reserve();
    const [row] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
    await killer`select pg_terminate_backend(${row!.pid})`;
    const first = await reserved`select 1`.then(
      () => 'answered',
      (err: { code?: string }) => err.code,
    );
    t.ok(first, `first query after the kill: ${first}`);
    const second = await reserved`select 1`.then(
      () => 'answered',
      (err: { code?: string }) => err.code,
    );
    t.equal(
      second,
      'CONNECTION_CLOSED',
      'the next query rejects (unpatched: an uncaught TypeError ends the process, or it never settles)',
    );

    // What the app does (Drizzle transactions): the backend dies between two statements.
    const transaction = sql
      .begin(async (tx) => {
        const [own] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
        await killer`select pg_terminate_backend(${own!.pid})`;
        await tx`select 1`;
        await tx`select 2`;
      })
      .then(
        () => 'committed',
        (err: { code?: string }) => err.code ?? 'rejected',
      );
    const outcome = await deadline('the transaction', transaction, 10_000).catch(
      () => 'never settled',
    );
    t.not(outcome, 'never settled', `the transaction settles: ${String(outcome)}`);
    t.not(outcome, 'committed');
    await waitUntil(
      'the pool to serve again',
      () =>
        sql`select 1`.then(
          () => true,
          () => false,
        ),
      { timeoutMs: 1000, everyMs: 100 },
    );
    t.pass('the pool serves again');
  },
);

t.test(
  'a server that accepts and closes: each query fails at once, the attempts back off',
  async (t) => {
    // What HAProxy does with no healthy backend. The stamps are when each attempt arrived.
    const arrivals: number[] = [];
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      arrivals.push(performance.now());
      socket.end();
    });
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy();
          server.close(() => resolve());
        }),
    );
    const { port } = server.address() as AddressInfo;
    const sql = postgres({ ...SESSION_OPTIONS, host: '127.0.0.1', port, max: 1 });
    t.teardown(() => sql.end({ timeout: 0 }));

    const started = performance.now();
    const outcomes = await deadline(
      'six queries against the closing server',
      Promise.all(
        Array.from({ length: 6 }, () =>
          sql`select 1`.then(
            () => 'answered',
            (err: { code?: string }) => err.code,
          ),
        ),
      ),
      5000,
    ).catch((err: Error) => err.message);
    t.same(
      outcomes,
      Array(6).fill('CONNECTION_CLOSED'),
      'every query fails (unpatched: none settles while the driver reconnects at once)',
    );
    t.equal(arrivals.length, 6, 'one connection attempt per query, no storm');
    // Elapsed time is the subject: SESSION_OPTIONS.backoff waits 0.1, 0.2, 0.4, 0.5, 0.5 s
    // between a failed attempt and the next (retries 1..5); leave slack for timers.
    const gaps = arrivals.slice(1, 6).map((at, i) => at - arrivals[i]!);
    const wanted = [100, 200, 400, 500, 500];
    gaps.forEach((gap, i) =>
      t.ok(gap >= wanted[i]! - 20, `attempt ${i + 2} came ${Math.round(gap)} ms after the last`),
    );
    t.ok(arrivals[0]! - started < 200, 'the first attempt is made at once');
  },
);

t.test(
  "a backend terminated during a query: the next connection's first query is answered",
  { skip: missing ?? false },
  async (t) => {
    const pg = await startPrivatePostgres(t);
    const sql = postgres(pg.url, {
      ...SESSION_OPTIONS,
      max: 1,
      connection: { ...SESSION_OPTIONS.connection, application_name: 'terminated' },
    });
    const killer = postgres(pg.url, { max: 1, onnotice: () => {} });
    t.teardown(() => Promise.all([sql.end({ timeout: 1 }), killer.end({ timeout: 1 })]));
    await sql`select 1`;
    const running = sql`select pg_sleep(30)`.then(
      () => 'answered',
      (err: { code?: string }) => err.code,
    );
    await waitUntil('the sleep to run', async () => {
      const [row] = await killer<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where application_name = 'terminated' and query like 'select pg_sleep%'`;
      return row!.n === 1;
    });
    const [killed] = await killer<{ done: boolean }[]>`
      select bool_and(pg_terminate_backend(pid)) as done from pg_stat_activity
      where application_name = 'terminated'`;
    t.ok(killed!.done, 'the backend was terminated (57P01 sent to it)');
    t.equal(await running, 'CONNECTION_CLOSED', 'the query in flight fails');
    const next = await sql<{ x: number }[]>`select 1 as x`.then(
      (rows) => `answered ${rows[0]!.x}`,
      (err: { code?: string }) => `failed ${err.code}`,
    );
    t.equal(next, 'answered 1', 'the next query runs (unpatched: it fails with the old 57P01)');
  },
);
