/**
 * The opaque cursor of a searched page (OpenAPI "Search and sync"): the last item's sort key and
 * id, and a digest of the query it was made for, so a cursor used with other filters or another
 * sort is refused (400 naming `cursor`) instead of paging something else. It is base64url JSON,
 * not signed: it holds nothing the caller has not already been shown, and every value read back
 * is checked before it reaches SQL as a parameter.
 */
import { hash } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import { isTimestamp } from '../lib/timestamps.ts';

export type SearchSort = 'newest' | 'price_asc' | 'price_desc' | 'updated_at' | 'relevance';

/** The last row of the previous page, as its order sees it (the cursor's content). */
export interface SortKey {
  publishedAt?: string | undefined;
  priceCents?: number | undefined;
  updatedAt?: string | undefined;
  id?: string | undefined;
  /** ts_rank as PostgreSQL prints a real: read back as the same real. */
  rank?: string | undefined;
}

// The feed's cursor and updated_since are checked with the same function (listings-read-service).

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A real as PostgreSQL prints it (shortest exact text). */
const REAL = /^-?\d+(\.\d+)?(e[-+]?\d+)?$/;
/** A numeral whose digits are all zero (`0`, `-0.000`, `0e5`): PostgreSQL reads it as zero. */
const ZERO = /^-?0+(\.0+)?(e[-+]?\d+)?$/;

/**
 * A rank PostgreSQL reads back as a real: a numeral that is zero, or one that rounds to a finite
 * non-zero single-precision float. float4in refuses a numeral that overflows or underflows to
 * zero (`3.5e38`, `1e-46`): out of range for type real, a 500 if it reached SQL.
 */
function isReal(value: unknown): value is string {
  if (typeof value !== 'string' || !REAL.test(value)) return false;
  if (ZERO.test(value)) return true;
  const single = Math.fround(Number(value));
  return Number.isFinite(single) && single !== 0;
}

/** What a page's cursor carries. */
export interface CursorState {
  key: SortKey;
  /** Relevance: the first page's time (only listings published by then are ranked). */
  publishedBy?: string | undefined;
}

interface Encoded {
  v: 1;
  d: string;
  k: SortKey;
  p?: string | undefined;
}

/** A digest of everything that decides a query's rows and order, `limit` aside. */
export function queryDigest(query: object): string {
  return hash('sha256', JSON.stringify(query), 'base64url').slice(0, 16);
}

export function encodeCursor(digest: string, state: CursorState): string {
  const encoded: Encoded = { v: 1, d: digest, k: state.key, p: state.publishedBy };
  return Buffer.from(JSON.stringify(encoded)).toString('base64url');
}

const refused = (why: string) => ValidationError.field('/query/cursor', why);

/** The cursor's state, if it was made for this query (digest) and sort; else a 400. */
export function decodeCursor(text: string, digest: string, sort: SearchSort): CursorState {
  let encoded: Partial<Encoded>;
  try {
    encoded = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Partial<Encoded>;
  } catch {
    throw refused('must be a meta.next_cursor of this search');
  }
  if (typeof encoded !== 'object' || encoded === null || encoded.v !== 1 || !encoded.k)
    throw refused('must be a meta.next_cursor of this search');
  if (encoded.d !== digest)
    throw refused('was made for another search: send the same q, filters and sort with it');
  const key = encoded.k;
  if (!validKey(sort, key) || (encoded.p !== undefined && !isTimestamp(encoded.p)))
    throw refused('must be a meta.next_cursor of this search');
  return { key, publishedBy: encoded.p };
}

function validKey(sort: SearchSort, key: SortKey): boolean {
  switch (sort) {
    case 'newest':
      return isTimestamp(key.publishedAt);
    case 'price_asc':
    case 'price_desc':
      return (
        isTimestamp(key.publishedAt) &&
        Number.isInteger(key.priceCents) &&
        key.priceCents! > 0 &&
        key.priceCents! < 2 ** 31
      );
    case 'updated_at':
      return isTimestamp(key.updatedAt) && typeof key.id === 'string' && UUID.test(key.id);
    case 'relevance':
      return isTimestamp(key.publishedAt) && isReal(key.rank);
  }
}
