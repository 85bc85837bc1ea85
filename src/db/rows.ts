import { Name, Placeholder, SQL, sql, StringChunk, type Query } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from './client.ts';

const dialect = new PgDialect();

/**
 * SQL_RENDER_CHECK=1 (the test suite sets it: package.json "tap"."test-env") renders every
 * statement with Drizzle too and throws if the two differ, so every query the suite runs, on both
 * databases, checks `render`.
 */
const CHECK_RENDER = process.env.SQL_RENDER_CHECK === '1';

/**
 * Runs raw SQL and returns its rows on either driver: postgres.js answers with an array,
 * PGlite with { rows }. Select only int4/text/bool/arrays or cast (int8 differs by driver).
 * Rendered by `render`, run through the session as `db.execute` would.
 */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  return run<T>(db, render(query));
}

async function run<T>(db: Db, query: Query, values?: Record<string, unknown>): Promise<T[]> {
  const result = (await db._.session
    .prepareQuery(query, undefined, undefined, false)
    .execute(values)) as unknown as T[] | { rows: T[] };
  return Array.isArray(result) ? result : result.rows;
}

/**
 * The text and parameters of a raw `sql` template, as PostgreSQL's dialect renders them
 * (`dialect.sqlToQuery`), for the chunks our repositories write: text, nested templates,
 * identifiers, placeholders and plain values. Drizzle's renderer asks every chunk which of a
 * dozen entity kinds it is and merges arrays at every level, which made rendering the largest
 * cost a write's statement added in a CPU profile; this walk does the same in one pass. Anything
 * else (columns, tables, Param, arrays, objects, inlined params) is left to Drizzle.
 * test/db/render.test.ts pins each kind; SQL_RENDER_CHECK (above) checks every statement.
 */
export function render(query: SQL): Query {
  const out = { sql: '', params: [] as unknown[] };
  if (!walk(query, out)) return dialect.sqlToQuery(query);
  if (CHECK_RENDER) compareWithDrizzle(out, query);
  return out;
}

function compareWithDrizzle(ours: Query, query: SQL): void {
  const theirs = dialect.sqlToQuery(query);
  const same =
    ours.sql === theirs.sql &&
    ours.params.length === theirs.params.length &&
    ours.params.every((p, i) => Object.is(p, theirs.params[i]));
  if (!same) throw new Error(`render differs from Drizzle's for: ${theirs.sql}`);
}

function walk(node: SQL, out: { sql: string; params: unknown[] }): boolean {
  if ((node as unknown as { shouldInlineParams: boolean }).shouldInlineParams) return false;
  for (const chunk of node.queryChunks) {
    if (chunk instanceof StringChunk) {
      for (const text of chunk.value) out.sql += text;
    } else if (chunk instanceof SQL) {
      if (!walk(chunk, out)) return false;
    } else if (chunk === undefined) {
      continue;
    } else if (chunk instanceof Name) {
      out.sql += `"${chunk.value.replace(/"/g, '""')}"`;
    } else if (
      chunk instanceof Placeholder ||
      chunk === null ||
      typeof chunk === 'string' ||
      typeof chunk === 'number' ||
      typeof chunk === 'boolean' ||
      typeof chunk === 'bigint'
    ) {
      out.params.push(chunk);
      out.sql += `$${out.params.length}`;
    } else {
      return false;
    }
  }
  return true;
}

/**
 * A statement whose text is rendered once per process, its values bound by name
 * (`sql.placeholder('id')`) on each run. queryRows renders its template on every call (in
 * Drizzle, that was the largest share of a by-id read's CPU the API itself added:
 * docs/performance.md); the hot reads keep their text. It runs through the same session as
 * `db.execute` (a transaction's, when `db` is one), so the pool gate, the prepared-statement
 * cache and PGlite behave alike.
 */
export class Statement<Values extends Record<string, unknown>> {
  private built: Query | undefined;

  constructor(private readonly query: SQL) {}

  rows<T>(db: Db, values: Values): Promise<T[]> {
    this.built ??= render(this.query);
    return run<T>(db, this.built, values);
  }
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
