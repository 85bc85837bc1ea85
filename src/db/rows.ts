import { Placeholder, sql, type Query, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from './database.ts';

/** Drizzle's PostgreSQL dialect: what renders a template's text and parameters. */
const dialect = new PgDialect();

/**
 * Runs raw SQL through Drizzle's `db.execute` (a transaction's, when `db` is one) and returns its
 * rows, typed. Select only int4/text/bool/arrays or cast (int8 differs by driver).
 */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute(query)) as unknown as T[];
}

/** The text and parameters of a raw `sql` template as it is sent (tests, probes, snapshots). */
export function render(query: SQL): Query {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return { sql: text, params };
}

/**
 * A statement's rendering kept: rendered once per process by Drizzle's dialect, its values bound
 * by name (`sql.placeholder('id')`) on each run (a render cache; whether PostgreSQL prepares it
 * is the Connection's, src/db/gated-client.ts). The hot reads keep theirs. It runs on `db` as
 * every statement does (a transaction's, when `db` is one), through its Connection
 * (database.ts `rendered`), so the pool gate, the prepared-statement cache and PGlite behave
 * alike.
 */
export class RenderedSql<Values extends Record<string, unknown>> {
  private built: Query | undefined;

  constructor(private readonly query: SQL) {}

  async rows<T>(db: Db, values: Values): Promise<T[]> {
    this.built ??= render(this.query);
    const params = this.built.params.map((param) => bound(param, values));
    return (await db.rendered({ sql: this.built.sql, params })) as T[];
  }
}

function bound(param: unknown, values: Record<string, unknown>): unknown {
  if (!(param instanceof Placeholder)) return param;
  if (!(param.name in values))
    throw new Error(`No value for placeholder "${param.name}" was provided`);
  return values[param.name];
}

const PG_TIMESTAMPTZ =
  /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?(?:\+00(?::?00)?|Z)$/;

/**
 * PostgreSQL's text for a timestamptz (sessions run in UTC: postgres.ts SESSION_OPTIONS) as
 * RFC 3339 with all six fractional digits: a JavaScript Date would drop the microseconds.
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

/**
 * Values as one SQL array of `type`, each its own parameter (or a statement's placeholder, or
 * SQL): `array[$1, $2]::uuid[]`, for `= any(...)`, `@>` and `unnest(...)`. `type` is trusted.
 */
export function sqlArray(values: readonly unknown[], type: 'text' | 'uuid' | 'int8'): SQL {
  return sql`array[${sql.join(
    values.map((value) => sql`${value}`),
    sql`, `,
  )}]::${sql.raw(type)}[]`;
}
