/**
 * Searched, filtered, sorted or synced pages of listings (OpenAPI "Search and sync"): each page
 * is one statement (search-statement.ts, where its bound is explained), run on the search pool;
 * this remembers which searches were sparse or too common lately (which source runs first), and
 * which statement shapes are prepared.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { PLANNED_PER_RUN } from '../db/gated-client.ts';
import { queryRows, RenderedSql } from '../db/rows.ts';
import {
  DEFAULT_LIMITS,
  searchStatement,
  type SearchLimits,
  type SearchQuery,
  type SearchRow,
  type SearchVersion,
  withPlaceholders,
} from './search-statement.ts';

/** A page as the search found it. */
export interface SearchPage {
  /** Up to limit + 1 rows in the page's order (limit + 1: more follow). */
  rows: SearchRow[];
  /**
   * A walk that ran out of rows before it found a page (and whose matches were too many to
   * gather): the last row it walked, where the next page resumes.
   */
  resumeAfter?: SearchVersion | undefined;
  /** The listing rows the statement read: walked plus gathered. */
  rowsRead: number;
  /** How the page was found: by the walk alone, or by gathering the matches. */
  via: 'walk' | 'gather';
}

/** A statement's row: a page's row, or the counts alone (an empty page). */
type Counted<T> = Partial<T> & {
  walked: number | string;
  gathered: number | string;
  by_gather: boolean;
  hit: boolean | null;
  pos: number | string | null;
};

export class ListingsSearchRepository {
  private readonly limits: SearchLimits;
  /**
   * Searches whose walk found too few matches lately: their next pages (and the same search by
   * anyone) gather first, instead of walking WALK_ROWS rows first again. Only the cost differs:
   * either order answers the same rows.
   */
  private readonly sparse = new RecentSet(SPARSE_SEARCHES, SPARSE_FOR_MS);
  /**
   * Searches whose matches were too many to gather lately: their next pages only walk (short
   * pages until the walk reaches where the matches are), without gathering again in vain.
   */
  private readonly ungatherable = new RecentSet(SPARSE_SEARCHES, SPARSE_FOR_MS);

  /**
   * The statement shapes (which filters, which sort and page, which source first: shapeOf) this
   * process prepares: the first PREPARED_SHAPES it meets. A prepared search is planned a few
   * times, then runs on its generic plan (PostgreSQL's plan_cache_mode = auto): planning was 1.5
   * to 2 ms of a worst-case search's 2.5 ms on PostgreSQL. The plan does not depend on the values
   * (the walk's WHERE is what its order's index serves, its bounds are literals, the gathering is
   * listings_matching's GIN scan; search-plans.test.ts checks the generic plans too). postgres.js
   * keeps a connection's prepared statements until it closes, so the first shapes, not the latest,
   * are the ones kept: a client sending ever new combinations of filters gets them planned per
   * run, as before, and cannot grow the search connections' memory. Each shape's statement is
   * built and rendered once, with placeholders for its values (withPlaceholders).
   */
  private readonly prepared = new Map<string, RenderedSql<Record<string, unknown>>>();

  constructor(
    private readonly db: Db,
    limits: Partial<SearchLimits> = {},
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /** One page of a search, in one statement. */
  async page(query: SearchQuery): Promise<SearchPage> {
    const search = sparseKey(query);
    const first = this.sparse.has(search)
      ? 'gather'
      : this.ungatherable.has(search)
        ? 'walk-only'
        : 'walk';
    const bound = withPlaceholders(query);
    const prepared = this.preparedStatement(query, bound.query, first);
    const rows = prepared
      ? await prepared.rows<Counted<SearchRow>>(this.db, bound.values)
      : await queryRows<Counted<SearchRow>>(this.db, planned(this.statement(query, first)));
    const counts = rows[0]!;
    const walked = Number(counts.walked);
    const gathered = Number(counts.gathered);
    if (counts.by_gather) this.sparse.remember(search);
    else if (gathered > this.limits.gatherRows) {
      this.sparse.forget(search);
      this.ungatherable.remember(search);
    }
    const found = rows.filter((row) => row.pos !== null);
    const hits = found.filter((row) => row.hit).map(pageRow);
    const page = hits.slice(0, query.limit + 1);
    const last = found[found.length - 1];
    const cutOff =
      !counts.by_gather &&
      query.sort !== 'relevance' &&
      page.length <= query.limit &&
      last !== undefined &&
      Number(last.pos) === this.limits.walkRows;
    return {
      rows: page,
      resumeAfter: cutOff ? pageRow(last) : undefined,
      rowsRead: walked + gathered,
      via: counts.by_gather ? 'gather' : 'walk',
    };
  }

  /** This search's prepared statement (`prepared`), or undefined: it is planned per run. */
  private preparedStatement(
    query: SearchQuery,
    placeholders: SearchQuery,
    first: 'walk' | 'gather' | 'walk-only',
  ): RenderedSql<Record<string, unknown>> | undefined {
    if (!mayPrepare(query)) return undefined;
    const shape = shapeOf(query, first);
    let statement = this.prepared.get(shape);
    if (statement === undefined && this.prepared.size < PREPARED_SHAPES) {
      statement = new RenderedSql(this.statement(placeholders, first));
      this.prepared.set(shape, statement);
    }
    return statement;
  }

  /** A page's statement, for the plan tests (EXPLAIN): walking first, or gathering first. */
  statement(query: SearchQuery, first: 'walk' | 'gather' | 'walk-only' = 'walk'): SQL {
    return searchStatement(query, this.limits, first);
  }
}

/** How many statement shapes one process prepares (on each search connection, at most). */
const PREPARED_SHAPES = 64;

/**
 * What a search's statement text depends on: its scope's kind, its sort, page size and source
 * first, whether it has a cursor (and a relevance window), and which filters it has (lists by
 * their length). Its values are parameters.
 */
function shapeOf(query: SearchQuery, first: string): string {
  const filters = Object.entries(query.filters)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => (Array.isArray(value) ? `${name}*${value.length}` : name))
    .sort();
  return [
    query.scope.kind,
    query.sort,
    query.limit,
    first,
    query.after === undefined ? '' : 'after',
    query.publishedBy === undefined ? '' : 'window',
    ...filters,
  ].join(' ');
}

/**
 * Whether a search's statement may be prepared: not when its walk starts within a range of its
 * order (a price range under a price order, updated_since under updated order). Without its
 * values the planner takes a range for 0.5% of the table, and a generic plan then sorts the
 * range instead of walking the index (seen in search-plans.test.ts): these are planned per run.
 */
export function mayPrepare(query: SearchQuery): boolean {
  const f = query.filters;
  if (query.sort === 'price_asc' || query.sort === 'price_desc')
    return f.minPriceCents === undefined && f.maxPriceCents === undefined;
  return query.sort !== 'updated_at' || f.updatedSince === undefined;
}

/** How many sparse searches are remembered, and for how long. */
const SPARSE_SEARCHES = 1000;
const SPARSE_FOR_MS = 600_000;

/** A search as its sparseness is remembered: what it matches and its order, not its page. */
function sparseKey(query: SearchQuery): string {
  return JSON.stringify([query.scope, query.filters, query.sort]);
}

/** A bounded set of recent keys, each kept for `ttlMs`; the oldest goes first when full. */
class RecentSet {
  private readonly at = new Map<string, number>();

  constructor(
    private readonly capacity: number,
    private readonly ttlMs: number,
  ) {}

  has(key: string): boolean {
    const since = this.at.get(key);
    if (since === undefined) return false;
    if (Date.now() - since < this.ttlMs) return true;
    this.at.delete(key);
    return false;
  }

  forget(key: string): void {
    this.at.delete(key);
  }

  remember(key: string): void {
    this.at.delete(key);
    if (this.at.size >= this.capacity) this.at.delete(this.at.keys().next().value!);
    this.at.set(key, Date.now());
  }
}

/** Planned per run, not prepared (PLANNED_PER_RUN): a shape beyond PREPARED_SHAPES. */
const planned = (statement: SQL) => sql`${sql.raw(PLANNED_PER_RUN)}${statement}`;

/**
 * A statement's row as a page's row. The counts stay on it (the view, the ETag and the cursor
 * read the row's own columns by name): copying each row without them cost about 0.4 ms of the
 * API's CPU per page of 24 (a CPU profile of the bench's stale If-None-Match search).
 */
const pageRow = (row: Counted<SearchRow>) => row as SearchRow;
