/**
 * The SQL of a searched, filtered, sorted or synced page of listings (OpenAPI "Search and
 * sync"). The plain feed keeps its prepared statements (listings-repository.ts); a search is
 * built per request from the filters it has, planned for its values (PLANNED_PER_RUN: a rare word
 * wants the text index, a common one an ordered index scan) and run under a statement timeout.
 *
 * Each order is a keyset on an index (drizzle/0010, schema.ts), so a page reads about `limit`
 * rows divided by the share of rows its filters keep; test/listings/search-plans.test.ts checks
 * the plans.
 */
import { sql, type SQL } from 'drizzle-orm';
import { PLANNED_PER_RUN, type Db } from '../db/client.ts';
import { ISO_MICROSECONDS, isoColumn, queryRows } from '../db/rows.ts';
import type { ListingStatus } from '../generated/schemas.ts';
import type { FeedScope } from '../access.ts';
import {
  COLUMNS,
  VERSION_COLUMNS,
  VERSIONS,
  type ListingRow,
  type RowVersion,
} from './listings-repository.ts';

export type SearchSort = 'newest' | 'price_asc' | 'price_desc' | 'updated_at' | 'relevance';

/** What a search keeps; every field optional, all of them must hold. */
export interface SearchFilters {
  q?: string | undefined;
  category?: string | undefined;
  condition?: readonly string[] | undefined;
  tag?: readonly string[] | undefined;
  brand?: string | undefined;
  size?: string | undefined;
  color?: string | undefined;
  minPriceCents?: number | undefined;
  maxPriceCents?: number | undefined;
  impactMode?: boolean | undefined;
  /** A seller's username (not `me`: the owner view is a seller scope). */
  sellerUsername?: string | undefined;
  status?: ListingStatus | undefined;
  updatedSince?: string | undefined;
}

/** The last row of the previous page, as its order sees it (the cursor's content). */
export interface SortKey {
  publishedAt?: string | undefined;
  priceCents?: number | undefined;
  updatedAt?: string | undefined;
  id?: string | undefined;
  /** ts_rank as PostgreSQL prints a real: read back as the same real. */
  rank?: string | undefined;
}

export interface SearchQuery {
  scope: FeedScope;
  filters: SearchFilters;
  sort: SearchSort;
  limit: number;
  after?: SortKey | undefined;
  /**
   * Relevance: only listings published at or before this (the newest listing of the first page's
   * window, SearchRow.window_top), so that later pages rank the same window.
   */
  publishedBy?: string | undefined;
}

/** A row of a searched page: its rank too when ranked by relevance. */
export type SearchRow = ListingRow & RowVersion & Ranked;
/** Relevance only: the row's rank, and the newest published_at of the window ranked. */
interface Ranked {
  sort_rank: string | null;
  window_top: string | null;
}
/** A searched row's versions and sort keys. */
export type SearchVersion = RowVersion &
  Pick<ListingRow, 'published_at' | 'price_cents' | 'updated_at'> &
  Ranked;

/** Relevance ranks the newest matches, at most this many (the rescoring window). */
const RELEVANCE_WINDOW = 1000;

/** SEARCH_TIMEOUT_MS and SYNC_SETTLE_MS (src/config.ts). */
export interface SearchLimits {
  /** No search statement runs longer (PostgreSQL cancels it; the request answers 503). */
  timeoutMs: number;
  /** Sync lists changes this old or older: a change still committing cannot pass a cursor. */
  syncSettleMs: number;
}
const DEFAULT_LIMITS: SearchLimits = { timeoutMs: 2000, syncSettleMs: 5000 };

const PUBLIC = sql`l.environment = 'live' and l.status = 'active'`;
const TEXT_QUERY = (q: string) => sql`websearch_to_tsquery('english', ${q})`;

/** The conditions of the caller's scope and the filters, on `listings l`. */
function conditions(scope: FeedScope, filters: SearchFilters): SQL[] {
  const where: SQL[] =
    scope.kind === 'public'
      ? [PUBLIC]
      : [sql`l.seller_id = ${scope.sellerId}`, sql`l.environment = ${scope.environment}`];
  return [...where, ...filterConditions(filters)];
}

/** The conditions of the filters alone, on `listings l`. */
function filterConditions(filters: SearchFilters): SQL[] {
  const where: SQL[] = [];
  const f = filters;
  if (f.status !== undefined) where.push(sql`l.status = ${f.status}`);
  if (f.q !== undefined) where.push(sql`l.search @@ ${TEXT_QUERY(f.q)}`);
  if (f.category !== undefined) where.push(sql`lower(l.category) = lower(${f.category})`);
  if (f.brand !== undefined) where.push(sql`lower(l.brand) = lower(${f.brand})`);
  if (f.size !== undefined) where.push(sql`lower(l.size) = lower(${f.size})`);
  if (f.color !== undefined) where.push(sql`lower(l.color) = lower(${f.color})`);
  if (f.condition !== undefined)
    where.push(
      sql`l.condition in (${sql.join(
        f.condition.map((c) => sql`${c}`),
        sql`, `,
      )})`,
    );
  if (f.tag !== undefined)
    where.push(
      sql`l.tags @> array[${sql.join(
        f.tag.map((t) => sql`${t}`),
        sql`, `,
      )}]::text[]`,
    );
  if (f.minPriceCents !== undefined) where.push(sql`l.price_cents >= ${f.minPriceCents}`);
  if (f.maxPriceCents !== undefined) where.push(sql`l.price_cents <= ${f.maxPriceCents}`);
  if (f.impactMode !== undefined) where.push(sql`l.impact_mode = ${f.impactMode}`);
  // The seller's id first (one lookup), so the seller's index serves the page in order.
  if (f.sellerUsername !== undefined)
    where.push(sql`l.seller_id = (select id from users where username = ${f.sellerUsername})`);
  if (f.updatedSince !== undefined) where.push(sql`l.updated_at >= ${f.updatedSince}::timestamptz`);
  return where;
}

/** The keyset condition after `after`, and the order, of each sort but relevance. */
function keyset(sort: Exclude<SearchSort, 'relevance'>, after: SortKey | undefined) {
  switch (sort) {
    case 'newest':
      return {
        after: after && sql`l.published_at < ${after.publishedAt}::timestamptz`,
        order: sql`l.published_at desc nulls last`,
      };
    case 'price_asc':
      return {
        after:
          after &&
          sql`(l.price_cents, l.published_at) > (${after.priceCents}::int, ${after.publishedAt}::timestamptz)`,
        order: sql`l.price_cents, l.published_at`,
      };
    case 'price_desc':
      return {
        after:
          after &&
          sql`(l.price_cents, l.published_at) < (${after.priceCents}::int, ${after.publishedAt}::timestamptz)`,
        order: sql`l.price_cents desc, l.published_at desc`,
      };
    case 'updated_at':
      return {
        after:
          after && sql`(l.updated_at, l.id) > (${after.updatedAt}::timestamptz, ${after.id}::uuid)`,
        order: sql`l.updated_at, l.id`,
      };
  }
}

/** The versions of a page's rows and what its cursor is made of (a 304 rebuilds the cursor). */
const SORT_COLUMNS = sql.join(
  [
    VERSION_COLUMNS,
    isoColumn('l.published_at', 'published_at'),
    sql.raw('l.price_cents'),
    isoColumn('l.updated_at', 'updated_at'),
  ],
  sql.raw(', '),
);

/** A page's columns, with the relevance rank and window top (null under other orders). */
function selected(columns: 'rows' | 'versions', ranked?: { rank: SQL; windowTop: SQL }): SQL {
  const extra = ranked
    ? sql`${ranked.rank} as sort_rank, ${ranked.windowTop} as window_top`
    : sql`null::text as sort_rank, null::text as window_top`;
  return columns === 'rows'
    ? sql`${COLUMNS}, ${VERSIONS}, ${extra}`
    : sql`${SORT_COLUMNS}, ${extra}`;
}

/**
 * A keyword page under an order of its own (newest, price, updated_at) first walks the order's
 * index for at most this many rows, keeping the matches: a common word fills its page within a
 * few rows. Only a walk that ends without a page's worth of matches asks the text index, which
 * then holds few enough matches (a share under (limit + 1) / WALK_ROWS) to read them all and
 * sort. So a page reads at most WALK_ROWS rows plus such a word's matches, whatever the
 * planner's estimates: they were off by 500x for words the parser splits (`plus-size`: 111
 * estimated, 52,941 matching), which took the text index and a sort of every match (0.99 s at
 * 1,000,000 listings) where the walk needed 581 rows. sqrt(25 x 1,000,000) balances the two.
 */
export const WALK_ROWS = 5000;

/**
 * The filters that the index of each order serves beside the scope (drizzle/0010): the feed's
 * by category, by brand, a seller's by status; the price index's ranges; the change index's
 * start. A walk keeps these in its WHERE; the others (and the word) only decide its hits.
 */
const ORDER_INDEX_FILTERS: Record<Exclude<SearchSort, 'relevance'>, (keyof SearchFilters)[]> = {
  newest: ['status', 'category', 'brand', 'sellerUsername'],
  price_asc: ['minPriceCents', 'maxPriceCents'],
  price_desc: ['minPriceCents', 'maxPriceCents'],
  updated_at: ['updatedSince'],
};

/** The conditions and order of a page under an order of its own (not relevance). */
function ordered(query: SearchQuery, settleMs: number) {
  const sort = query.sort as Exclude<SearchSort, 'relevance'>;
  const where = conditions(query.scope, query.filters);
  if (sort === 'updated_at')
    where.push(sql`l.updated_at < now() - make_interval(secs => ${settleMs / 1000})`);
  const { after, order } = keyset(sort, query.after);
  if (after) where.push(after);
  return { where: sql.join(where, sql` and `), order };
}

/** The statement of one page: `limit + 1` rows, so the caller knows whether more follow. */
function pageSql(query: SearchQuery, columns: 'rows' | 'versions', settleMs: number): SQL {
  if (query.sort === 'relevance')
    return rankedSql(query, conditions(query.scope, query.filters), columns);
  const { where, order } = ordered(query, settleMs);
  return sql`select ${selected(columns)}
    from listings l join users u on u.id = l.seller_id
    where ${where}
    order by ${order} limit ${query.limit + 1}`;
}

/**
 * The walk of a keyword page (WALK_ROWS): the first WALK_ROWS rows of the order without the
 * word, numbered, of which it keeps the matches and the last row walked (`walked` = WALK_ROWS:
 * the walk was cut off), and only the first limit + 2 of those: it stops as soon as a page is
 * full. The order of the rows it keeps is `walk_rn`.
 */
function walkSql(query: SearchQuery, columns: 'rows' | 'versions', settleMs: number): SQL {
  // The walk reads the order's index: only what that index serves narrows it (WHERE), so it
  // reads at most WALK_ROWS rows; every other filter, the word's included, decides a hit.
  const served = ORDER_INDEX_FILTERS[query.sort as Exclude<SearchSort, 'relevance'>];
  const inWalk: SearchFilters = {};
  const inHit: SearchFilters = {};
  for (const [name, value] of Object.entries(query.filters) as [keyof SearchFilters, never][]) {
    if (value === undefined) continue;
    (served.includes(name) && name !== 'q' ? inWalk : inHit)[name] = value;
  }
  const { where, order } = ordered({ ...query, filters: inWalk }, settleMs);
  const hit = sql.join(filterConditions(inHit), sql` and `);
  return sql`select ${selected(columns)}, w.hit, w.rn as walk_rn
    from (
      select * from (
        select l.id, (${hit}) as hit,
          row_number() over (order by ${order}) as rn
        from listings l
        where ${where}
        order by ${order} limit ${WALK_ROWS}
      ) walk
      where walk.hit or walk.rn = ${WALK_ROWS}
      limit ${query.limit + 2}
    ) w join listings l on l.id = w.id join users u on u.id = l.seller_id
    order by w.rn`;
}

/**
 * A keyword page through the text index, for a word the walk found too rare: its matches,
 * fetched without an order (so through the index), then sorted.
 */
function matchesSql(query: SearchQuery, columns: 'rows' | 'versions', settleMs: number): SQL {
  const { where, order } = ordered(query, settleMs);
  return sql`with m as materialized (select l.id from listings l where ${where})
    select ${selected(columns)}
    from m join listings l on l.id = m.id join users u on u.id = l.seller_id
    order by ${order} limit ${query.limit + 1}`;
}

/** What a walk found: a page, every match there is (the walk reached the end), or too few. */
export function walkOutcome(
  rows: readonly { hit: boolean; walk_rn: number | string }[],
  limit: number,
): 'page' | 'exhausted' | 'cut-off' {
  const hits = rows.filter((row) => row.hit).length;
  if (hits > limit) return 'page';
  return rows.some((row) => Number(row.walk_rn) === WALK_ROWS) ? 'cut-off' : 'exhausted';
}

/**
 * Relevance: the RELEVANCE_WINDOW newest matches published by the first page (an ordered scan or
 * the text index, whichever the planner finds cheaper), ranked, the page after the cursor's
 * (rank, published_at), then joined to their full rows.
 */
function rankedSql(query: SearchQuery, where: SQL[], columns: 'rows' | 'versions'): SQL {
  const q = query.filters.q ?? '';
  if (query.publishedBy !== undefined)
    where.push(sql`l.published_at <= ${query.publishedBy}::timestamptz`);
  const after = query.after
    ? sql`where (w.rank, w.published_at) < (${query.after.rank}::real, ${query.after.publishedAt}::timestamptz)`
    : sql``;
  return sql`with w as (
      select l.id, l.published_at, ts_rank(l.search, ${TEXT_QUERY(q)}) as rank
      from listings l
      where ${sql.join(where, sql` and `)}
      order by l.published_at desc nulls last limit ${RELEVANCE_WINDOW}
    ), top as (
      select w.id, w.rank, w.published_at from w ${after}
      order by w.rank desc, w.published_at desc limit ${query.limit + 1}
    )
    select ${selected(columns, {
      rank: sql`top.rank::text`,
      // The newest listing of the window: later pages rank the same window (SearchQuery.publishedBy).
      windowTop: sql.raw(
        `to_char((select max(published_at) from w) at time zone 'UTC', ${ISO_MICROSECONDS})`,
      ),
    })}
    from top join listings l on l.id = top.id join users u on u.id = l.seller_id
    order by top.rank desc, top.published_at desc`;
}

export class ListingsSearchRepository {
  private readonly limits: SearchLimits;
  /**
   * Keyword searches whose walk found too few matches lately: their next pages (and the same
   * search by anyone) go to the text index at once, instead of walking WALK_ROWS rows first
   * again. Only the cost differs: either path answers the same rows.
   */
  private readonly sparse = new RecentSet(SPARSE_SEARCHES, SPARSE_FOR_MS);

  constructor(
    private readonly db: Db,
    limits: Partial<SearchLimits> = {},
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  /** One page of a search: limit + 1 rows in the query's order. */
  page(query: SearchQuery): Promise<SearchRow[]> {
    return this.pageOf<SearchRow>(query, 'rows');
  }

  /** The same page's versions and sort keys only: what a conditional GET is answered from. */
  pageVersions(query: SearchQuery): Promise<SearchVersion[]> {
    return this.pageOf<SearchVersion>(query, 'versions');
  }

  /**
   * A page's statements, for the plan tests (EXPLAIN): the page's own, or a keyword page's walk
   * and its text-index statement.
   */
  statements(query: SearchQuery): { page: SQL } | { walk: SQL; matches: SQL } {
    const settle = this.limits.syncSettleMs;
    if (!walks(query)) return { page: pageSql(query, 'rows', settle) };
    return { walk: walkSql(query, 'rows', settle), matches: matchesSql(query, 'rows', settle) };
  }

  private pageOf<T>(query: SearchQuery, columns: 'rows' | 'versions'): Promise<T[]> {
    const settle = this.limits.syncSettleMs;
    if (!walks(query))
      return this.run((tx) => queryRows<T>(tx, planned(pageSql(query, columns, settle))));
    const search = sparseKey(query);
    return this.run(async (tx) => {
      if (!this.sparse.has(search)) {
        type Walked = T & { hit: boolean; walk_rn: number | string };
        const walked = await queryRows<Walked>(tx, planned(walkSql(query, columns, settle)));
        if (walkOutcome(walked, query.limit) !== 'cut-off')
          return walked
            .filter((row) => row.hit)
            .slice(0, query.limit + 1)
            .map(withoutWalk);
        this.sparse.remember(search);
      }
      return queryRows<T>(tx, planned(matchesSql(query, columns, settle)));
    });
  }

  /**
   * Bounded in time: in a transaction whose statement_timeout is SEARCH_TIMEOUT_MS (SET LOCAL
   * ends with the transaction).
   */
  private run<T>(work: (tx: Db) => Promise<T[]>): Promise<T[]> {
    return this.db.transaction(async (tx) => {
      await queryRows(tx, sql.raw(`set local statement_timeout = ${this.limits.timeoutMs}`));
      return work(tx);
    });
  }
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

  remember(key: string): void {
    this.at.delete(key);
    if (this.at.size >= this.capacity) this.at.delete(this.at.keys().next().value!);
    this.at.set(key, Date.now());
  }
}

/** Keyword pages under an order of their own walk that order first (WALK_ROWS). */
const walks = (query: SearchQuery) => query.filters.q !== undefined && query.sort !== 'relevance';

/** Planned for its values, not prepared (PLANNED_PER_RUN). */
const planned = (statement: SQL) => sql`${sql.raw(PLANNED_PER_RUN)}${statement}`;

/** A walked row as a page's row. */
function withoutWalk<T>(row: T & { hit: boolean; walk_rn: number | string }): T {
  const { hit: _hit, walk_rn: _rn, ...rest } = row;
  return rest as T;
}
