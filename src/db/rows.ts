import { sql, type Query, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from './client.ts';

/**
 * Runs raw SQL and returns its rows on either driver: postgres.js answers with an array,
 * PGlite with { rows }. Select only int4/text/bool/arrays or cast (int8 differs by driver).
 */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as T[] | { rows: T[] };
  return Array.isArray(result) ? result : result.rows;
}

const dialect = new PgDialect();

/**
 * A statement whose text is rendered once per process, its values bound by name
 * (`sql.placeholder('id')`) on each run. `db.execute(sql\`...\`)` renders the template's
 * fragments into text on every call, which was the largest share of a by-id read's CPU that the
 * API itself added (docs/performance.md, where a request's CPU goes); the hot reads keep their
 * text. It runs through the same session as `db.execute` (a transaction's, when `db` is one),
 * so the pool gate, the prepared-statement cache and PGlite behave alike.
 */
export class Statement<Values extends Record<string, unknown>> {
  private built: Query | undefined;

  constructor(private readonly query: SQL) {}

  async rows<T>(db: Db, values: Values): Promise<T[]> {
    this.built ??= dialect.sqlToQuery(this.query);
    const result = (await db._.session
      .prepareQuery(this.built, undefined, undefined, false)
      .execute(values)) as unknown as T[] | { rows: T[] };
    return Array.isArray(result) ? result : result.rows;
  }
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
