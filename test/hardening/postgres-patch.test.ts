/**
 * patches/postgres+3.4.9.patch (applied by patch-package, the `postinstall` of `npm install` and
 * `npm ci`; patches/README.md): postgres.js must not crash the process when a connection's
 * backend goes away (porsager/postgres#1208), and its queues must not grow by a slot per query.
 * The installed builds carry every hunk; the patch is for the exact version installed and pinned;
 * the upstream reproduction (a query on a reserved connection whose backend was terminated)
 * rejects with CONNECTION_CLOSED instead of throwing an uncaught TypeError. On the unpatched
 * driver (`npx patch-package --reverse`) the three tests fail.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from 'postgres';
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
    'connection.js': [5, 'the guard, both resets, the close, the type fetch'],
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
    // The next query may still meet the terminated backend once (57P01, a 503 in the app).
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
