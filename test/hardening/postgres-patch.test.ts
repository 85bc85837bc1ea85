/**
 * scripts/patch-postgres.ts (run by npm install): postgres.js must not crash the process when a
 * connection's backend goes away (porsager/postgres#1208). The installed builds carry the patch;
 * the upstream reproduction (a query on a reserved connection whose backend was terminated)
 * rejects with CONNECTION_CLOSED instead of throwing an uncaught TypeError; the patch is
 * idempotent and refuses source it does not recognise.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { patchConnectionSource } from '../../scripts/patch-postgres.ts';
import { privateServersMissing, startPrivatePostgres } from '../helpers/private-servers.ts';

const root = join(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');

t.test('the installed postgres.js builds are patched', async (t) => {
  for (const build of ['src', 'cjs/src', 'cf/src']) {
    const source = readFileSync(join(root, build, 'connection.js'), 'utf8');
    t.equal(
      source.split('patched by scripts/patch-postgres.ts').length - 1,
      4,
      `${build}: the guard, both resets, the close`,
    );
    t.equal(
      patchConnectionSource(source, build),
      source,
      `${build}: patching again changes nothing`,
    );
  }
  t.throws(
    () => patchConnectionSource('function somethingElse() {}', 'x.js'),
    /does not look like postgres\.js 3\.4\.9/,
  );
});

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
    const outcome = await Promise.race([
      transaction,
      new Promise((resolve) => setTimeout(() => resolve('never settled'), 10_000).unref()),
    ]);
    t.not(outcome, 'never settled', `the transaction settles: ${String(outcome)}`);
    t.not(outcome, 'committed');
    // The next query may still meet the terminated backend once (57P01, a 503 in the app).
    let served = false;
    for (let attempt = 0; attempt < 5 && !served; attempt += 1) {
      served = await sql`select 1`.then(
        () => true,
        () => new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 100)),
      );
    }
    t.ok(served, 'the pool serves again');
  },
);
