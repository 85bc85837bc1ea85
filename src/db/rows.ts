import { sql, type SQL } from 'drizzle-orm';
import type { Db } from './client.ts';

/**
 * Runs raw SQL and returns its rows on either driver: postgres.js answers with an array,
 * PGlite with { rows }. Select only int4/text/bool/arrays or cast (int8 differs by driver).
 */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as T[] | { rows: T[] };
  return Array.isArray(result) ? result : result.rows;
}

const PG_TIMESTAMPTZ =
  /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?(?:\+00(?::?00)?|Z)$/;

/**
 * PostgreSQL's text for a timestamptz (sessions run in UTC, see client.ts) as RFC 3339 with
 * all six fractional digits: a JavaScript Date would drop the microseconds.
 */
export function isoTimestamp(text: string): string {
  const match = PG_TIMESTAMPTZ.exec(text);
  if (!match) throw new Error(`unexpected timestamp text from the database: ${text}`);
  return `${match[1]}T${match[2]}.${(match[3] ?? '').padEnd(6, '0')}Z`;
}

/** PostgreSQL's to_char pattern for RFC 3339 in UTC with all six fractional digits. */
export const ISO_MICROSECONDS = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;

/**
 * A timestamptz column formatted by PostgreSQL as RFC 3339 with microseconds (a JavaScript
 * Date would drop them), selected `as` a name: `isoColumn('l.published_at', 'published_at')`.
 * Both are trusted SQL written in the repositories, never input.
 */
export function isoColumn(column: string, as: string): SQL {
  return sql.raw(`to_char(${column} at time zone 'UTC', ${ISO_MICROSECONDS}) as ${as}`);
}
