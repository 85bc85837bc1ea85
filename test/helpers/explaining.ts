/**
 * A database stand-in that runs each statement it is given prefixed with EXPLAIN (or EXPLAIN
 * ANALYZE) on `tx`, and answers with the plan's lines as rows: a repository handed it returns
 * the plan of its own SQL, so a plan test follows the query as it evolves. Both ways a repository
 * runs a statement are covered: db.execute(sql) and a Statement rendered once (src/db/rows.ts),
 * which runs through db._.session.
 */
import { sql, type Query } from 'drizzle-orm';
import type { Db } from '../../src/db/client.ts';

export function explaining(tx: Db, prefix: 'explain' | 'explain analyze'): Db {
  return {
    execute: (query: Parameters<Db['execute']>[0]) => tx.execute(sql`${sql.raw(prefix)} ${query}`),
    _: {
      session: {
        prepareQuery: (query: Query, ...rest: [undefined, undefined, boolean]) =>
          tx._.session.prepareQuery({ ...query, sql: `${prefix} ${query.sql}` }, ...rest),
      },
    },
  } as unknown as Db;
}

/** The plan's text, from what `explaining` answered: rows, or PGlite's `{ rows }`. */
export function planText(result: unknown): string {
  const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
  return rows.map((r) => Object.values(r as Record<string, string>)[0]).join('\n');
}
