import { Name, Param, Placeholder, SQL, sql, StringChunk, type Query } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from './database.ts';

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
 * Run by Drizzle's `db.execute` (a transaction's, when `db` is one), flattened first (`flat`).
 */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const built = flat(query);
  return run<T>(db, built ? built.sql(undefined) : query);
}

async function run<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as T[] | { rows: T[] };
  return Array.isArray(result) ? result : result.rows;
}

/**
 * A template flattened: its text in the pieces between parameters, and the parameters (values,
 * or placeholders bound on each run). `sql` rebuilds it as one flat SQL of string chunks and
 * Params, which Drizzle renders in one pass over as many chunks as the statement has
 * parameters, where a template of nested templates costs a walk of the whole tree in which each
 * chunk is asked which of a dozen entity kinds it is and arrays are merged at every level (in a
 * CPU profile, the largest cost a write's statement added).
 */
interface Flat {
  texts: string[];
  params: unknown[];
  sql(values: Record<string, unknown> | undefined): SQL;
}

/**
 * `query` flattened, for the chunks our repositories write: text, nested templates,
 * identifiers, placeholders and plain values; undefined for anything else (columns, tables,
 * Param, arrays, objects), which Drizzle renders itself. Only Drizzle's published classes and
 * properties are read (SQL.queryChunks, StringChunk, Name and Placeholder), so a template's
 * `.inlineParams()`, a private flag, is not seen: none is written here (SQL_RENDER_CHECK would
 * fail on one). test/db/render.test.ts pins each kind; SQL_RENDER_CHECK (above) checks every
 * statement against Drizzle's own text.
 */
function flat(query: SQL): Flat | undefined {
  const texts: string[] = [];
  const params: unknown[] = [];
  const out = { text: '', texts, params };
  if (!walk(query, out)) return undefined;
  texts.push(out.text);
  if (CHECK_RENDER) compareWithDrizzle(joined(texts, params), query);
  return {
    texts,
    params,
    sql(values) {
      const chunks: unknown[] = [new StringChunk(texts[0]!)];
      for (let i = 0; i < params.length; i += 1) {
        const param = params[i];
        chunks.push(new Param(param instanceof Placeholder ? bound(param, values) : param));
        chunks.push(new StringChunk(texts[i + 1]!));
      }
      return new SQL(chunks as SQL['queryChunks']);
    },
  };
}

function bound(placeholder: Placeholder, values: Record<string, unknown> | undefined): unknown {
  if (!values || !(placeholder.name in values))
    throw new Error(`No value for placeholder "${placeholder.name}" was provided`);
  return values[placeholder.name];
}

function joined(texts: string[], params: unknown[]): Query {
  let text = texts[0]!;
  for (let i = 0; i < params.length; i += 1) text += `$${i + 1}${texts[i + 1]!}`;
  return { sql: text, params };
}

/** The text and parameters of a raw `sql` template as this module sends it (tests, probes). */
export function render(query: SQL): Query {
  const built = flat(query);
  return built ? joined(built.texts, built.params) : dialect.sqlToQuery(query);
}

function compareWithDrizzle(ours: Query, query: SQL): void {
  const theirs = dialect.sqlToQuery(query);
  const same =
    ours.sql === theirs.sql &&
    ours.params.length === theirs.params.length &&
    ours.params.every((p, i) => Object.is(p, theirs.params[i]));
  if (!same) throw new Error(`render differs from Drizzle's for: ${theirs.sql}`);
}

function walk(node: SQL, out: { text: string; texts: string[]; params: unknown[] }): boolean {
  for (const chunk of node.queryChunks) {
    if (chunk instanceof StringChunk) {
      for (const text of chunk.value) out.text += text;
    } else if (chunk instanceof SQL) {
      if (!walk(chunk, out)) return false;
    } else if (chunk === undefined) {
      continue;
    } else if (chunk instanceof Name) {
      out.text += `"${chunk.value.replace(/"/g, '""')}"`;
    } else if (
      chunk instanceof Placeholder ||
      chunk === null ||
      typeof chunk === 'string' ||
      typeof chunk === 'number' ||
      typeof chunk === 'boolean' ||
      typeof chunk === 'bigint'
    ) {
      out.texts.push(out.text);
      out.text = '';
      out.params.push(chunk);
    } else {
      return false;
    }
  }
  return true;
}

/**
 * A statement's rendering kept: flattened once per process, its values bound by name
 * (`sql.placeholder('id')`) on each run (a render cache; whether PostgreSQL prepares it is the
 * driver's, src/db/gated-client.ts). queryRows flattens its template on every call; the hot
 * reads keep theirs. It runs through `db.execute` as queryRows does (a transaction's, when `db`
 * is one), so the pool gate, the prepared-statement cache and PGlite behave alike.
 */
export class RenderedSql<Values extends Record<string, unknown>> {
  private built: Flat | undefined;

  constructor(private readonly query: SQL) {}

  rows<T>(db: Db, values: Values): Promise<T[]> {
    this.built ??= flat(this.query);
    if (!this.built) throw new Error('a RenderedSql holds text, names, values and placeholders');
    return run<T>(db, this.built.sql(values));
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
