/**
 * Ordering keys that cannot clash (src/db/ordering-key.ts): listings' published_at and events'
 * created_at come from a sequence and the clock's millisecond, so concurrent writers never pick
 * the same instant and no write is retried on the unique index (issue #18 item 4). Checked on
 * the real database: many statements at once, each taking a batch of keys.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { orderingKeys } from '../../src/db/ordering-key.ts';
import { queryRows } from '../../src/db/rows.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';

const handle = await openDatabase({
  databaseUrl: await freshDatabaseUrl(t),
  pgliteDir: '',
  poolSize: 10,
});
t.teardown(() => handle.close());

interface Key {
  at: string;
  k: number;
  micros: string;
}

const take = (count: number) =>
  queryRows<Key>(
    handle.db,
    sql`with ${orderingKeys('keys', 'listings_published_seq', sql`${count}::int`)}
        select to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at, k,
          (extract(epoch from at) * 1000000)::bigint::text as micros
        from keys order by k`,
  );

t.test('concurrent statements never take the same key; each rises in order', async (t) => {
  const before = Date.now();
  const statements = await Promise.all(Array.from({ length: 40 }, (_, i) => take(1 + (i % 25))));
  const after = Date.now();
  const all = statements.flat();
  t.equal(
    all.length,
    statements.reduce((n, keys) => n + keys.length, 0),
  );
  t.equal(new Set(all.map((key) => key.at)).size, all.length, `${all.length} keys, all distinct`);
  for (const keys of statements) {
    t.same(
      keys.map((key) => key.k),
      keys.map((_, i) => i),
      'k counts 0, 1, 2, ...',
    );
    const micros = keys.map((key) => BigInt(key.micros));
    t.ok(
      micros.every((m, i) => i === 0 || m > micros[i - 1]!),
      'and the keys rise with k (a batch keeps its order)',
    );
  }
  // Near the clock: the millisecond the statement took them in, plus at most 2 ms of offsets.
  const ms = all.map((key) => Number(BigInt(key.micros) / 1000n));
  t.ok(Math.min(...ms) >= before - 1000 && Math.max(...ms) <= after + 1000, 'at the time taken');
});

t.test(
  'keys of one statement never cross into another statement of the same millisecond',
  async (t) => {
    // Many single keys and batches interleaved as fast as the database takes them.
    const rounds = await Promise.all(
      Array.from({ length: 200 }, (_, i) => take(i % 7 === 0 ? 25 : 1)),
    );
    const keys = rounds.flat().map((key) => key.at);
    t.equal(new Set(keys).size, keys.length, `${keys.length} keys, all distinct`);
  },
);
