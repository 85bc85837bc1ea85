/** WAL written while `work` runs (the cluster's: run on a PostgreSQL nothing else writes to). */
import type { Sql } from 'postgres';

/** [bytes of WAL, milliseconds] of `work`. */
export async function walBytesOf(
  sql: Sql,
  work: () => Promise<unknown>,
): Promise<[number, number]> {
  const [before] = await sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`;
  const started = performance.now();
  await work();
  const ms = performance.now() - started;
  const [after] = await sql<{ bytes: string }[]>`
    select pg_wal_lsn_diff(pg_current_wal_lsn(), ${before!.lsn}::pg_lsn)::text as bytes`;
  return [Number(after!.bytes), ms];
}
