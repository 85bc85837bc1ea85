/**
 * The one statement of a searched, filtered, sorted or synced page of listings (OpenAPI "Search
 * and sync"; run by listings-search-repository.ts). The plain feed has statements of its own
 * (listings-repository.ts); a search's is built from the filters it has, and its work is bounded
 * whatever its values and whatever the planner's statistics say: it reads at most
 *   - a walk of its order's index (the scope's partial index, or a seller's), at most WALK_ROWS
 *     rows, keeping the rows its filters and word match; and, only when the walk ends without a
 *     page's worth of them,
 *   - the matches gathered through one GIN index of words and filter tokens (`match`,
 *     drizzle/0013), at most GATHER_ROWS of them, then sorted.
 * A search whose walk found too few matches and whose matches are too many to gather answers
 * the walk's matches and a cursor where the walk stopped: a short page (even an empty one) whose
 * next_cursor goes on. test/listings/search-plans.test.ts checks the bound with EXPLAIN.
 */
import { sql, type SQL } from 'drizzle-orm';
import { ISO_MICROSECONDS } from '../db/rows.ts';
import type { FeedScope } from '../access.ts';
import { COLUMNS, VERSIONS, type ListingRow, type RowVersion } from './listings-repository.ts';
import {
  filterConditions,
  scopeConditions,
  TEXT_QUERY,
  type SearchFilters,
} from './search-filters.ts';
import type { SearchSort, SortKey } from './listing-cursor.ts';

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

/**
 * A walk reads at most this many rows of its order's index. A filter that keeps a share s of
 * the rows fills a page of `limit` within (limit + 1) / s rows; below s = (limit + 1) /
 * WALK_ROWS the matches are gathered instead, of which there are then about s x N: the two
 * costs meet at s = sqrt((limit + 1) / N), about 5,000 rows each at 1,000,000 listings.
 */
const WALK_ROWS = 5000;
/** At most this many matches are gathered (through the GIN index) and sorted. */
const GATHER_ROWS = 5000;
/** Relevance gathers only when its walk kept fewer than this many matches (a rare word). */
const RELEVANCE_GATHER_BELOW = RELEVANCE_WINDOW / 4;

/** SYNC_SETTLE_MS (src/config.ts), and the bounds (smaller in tests, to reach them cheaply). */
export interface SearchLimits {
  /** Sync lists changes this old or older: a change still committing cannot pass a cursor. */
  syncSettleMs: number;
  walkRows: number;
  gatherRows: number;
}
export const DEFAULT_LIMITS: SearchLimits = {
  syncSettleMs: 5000,
  walkRows: WALK_ROWS,
  gatherRows: GATHER_ROWS,
};

/**
 * A bound or a count as a literal, not a parameter: a prepared statement's generic plan takes a
 * LIMIT parameter for a tenth of the table, and could then prefer sorting a scan to walking an
 * index. Only integers the repository computes (never a client's text) come here.
 */
const int = (value: number) => sql.raw(String(Math.trunc(value)));

/** One token of listings_match_document (drizzle/0013) as a tsquery. */
/** Tokens are made of [a-z0-9:_-] only (digests, enums, uuids): quoted, each is one lexeme. */
const token = (text: SQL) => sql`quote_literal(${text})::tsquery`;
const digestToken = (name: string, value: SQL) =>
  token(sql`${sql.raw(`'${name}:'`)} || md5(${value})`);
/** A token of a name and a value (`status:active`): the value joined in SQL, a parameter. */
const valueToken = (name: string, value: unknown) =>
  token(sql`${sql.raw(`'${name}:'`)} || ${value}::text`);

/**
 * What the GIN index can gather a search's matches by: the tokens of its scope and filters and
 * its word, all of which a match has; null when nothing but the scope narrows it (price and
 * time ranges are not tokens), so that gathering would be the whole scope.
 */
function matchQuery(scope: FeedScope, filters: SearchFilters): SQL | null {
  const f = filters;
  const parts: SQL[] = [];
  if (f.q !== undefined) parts.push(TEXT_QUERY(f.q));
  // A seller's listings in the scope's environment: live for the public feed, the key's own
  // otherwise (a sandbox key's seller=<another user> then has no match, as its feed has none).
  const environment = scope.kind === 'public' ? sql`'live'` : sql`${scope.environment}::text`;
  if (f.sellerUsername !== undefined)
    parts.push(
      token(
        sql`'seller:' || ${environment} || ':' || (select id::text from users where username = ${f.sellerUsername})`,
      ),
    );
  if (f.status !== undefined) parts.push(valueToken('status', f.status));
  if (f.category !== undefined) parts.push(digestToken('category', sql`lower(${f.category})`));
  if (f.brand !== undefined) parts.push(digestToken('brand', sql`lower(${f.brand})`));
  if (f.size !== undefined) parts.push(digestToken('size', sql`lower(${f.size})`));
  if (f.color !== undefined) parts.push(digestToken('color', sql`lower(${f.color})`));
  if (f.condition !== undefined)
    parts.push(
      sql`(${sql.join(
        f.condition.map((c) => valueToken('condition', c)),
        sql` || `,
      )})`,
    );
  for (const tag of f.tag ?? []) parts.push(digestToken('tag', sql`${tag}`));
  if (f.impactMode !== undefined) parts.push(valueToken('impact', sql`${f.impactMode}::boolean`));
  if (parts.length === 0) return null;
  const scoped =
    scope.kind === 'public'
      ? token(sql`'scope:public'`)
      : token(sql`'seller:' || ${scope.environment}::text || ':' || ${scope.sellerId}::text`);
  return sql.join([scoped, ...parts], sql` && `);
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

/**
 * The walk's index: its conditions are the scope's (or, with a `seller` filter on the public
 * feed, that seller's live listings: the seller's own indexes) and the order's keyset, nothing
 * else, so that the order's index serves every one of them and the walk's LIMIT bounds the rows
 * it reads. Price ranges under a price order and `updated_since` under updated order are where
 * the walk starts (the same index range). Everything else decides which walked rows are kept.
 */
function walkPlan(query: SearchQuery, sort: Exclude<SearchSort, 'relevance'>, settleMs: number) {
  const f = query.filters;
  const bySeller = query.scope.kind === 'public' && f.sellerUsername !== undefined;
  const where = bySeller
    ? [
        sql`l.seller_id = (select id from users where username = ${f.sellerUsername})`,
        sql`l.environment = 'live'`,
      ]
    : scopeConditions(query.scope);
  const { after, order } = keyset(sort, query.after);
  if (after) where.push(after);
  // The seller is where the walk starts only when it walks that seller's index; in a seller
  // scope the walk is the scope's, and the seller filter is kept like any other.
  const started: (keyof SearchFilters)[] = bySeller ? ['sellerUsername'] : [];
  if (sort === 'price_asc' || sort === 'price_desc') {
    if (f.minPriceCents !== undefined) where.push(sql`l.price_cents >= ${f.minPriceCents}`);
    if (f.maxPriceCents !== undefined) where.push(sql`l.price_cents <= ${f.maxPriceCents}`);
    started.push('minPriceCents', 'maxPriceCents');
  }
  if (sort === 'updated_at') {
    where.push(sql`l.updated_at < now() - make_interval(secs => ${settleMs / 1000})`);
    if (f.updatedSince !== undefined)
      where.push(sql`l.updated_at >= ${f.updatedSince}::timestamptz`);
    started.push('updatedSince');
  }
  const kept: SearchFilters = {};
  for (const [name, value] of Object.entries(f) as [keyof SearchFilters, never][])
    if (value !== undefined && !started.includes(name)) kept[name] = value;
  const keep = [...(bySeller ? [sql`l.status = 'active'`] : []), ...filterConditions(kept)];
  return {
    where: sql.join(where, sql` and `),
    keep: keep.length === 0 ? sql`true` : sql.join(keep, sql` and `),
    order,
  };
}

/** Every condition a returned row meets, on `listings l`: gathered rows are checked by them. */
function exactConditions(query: SearchQuery, settleMs: number): SQL {
  const where = [...scopeConditions(query.scope), ...filterConditions(query.filters)];
  if (query.sort === 'updated_at')
    where.push(sql`l.updated_at < now() - make_interval(secs => ${settleMs / 1000})`);
  if (query.sort !== 'relevance') {
    const { after } = keyset(query.sort, query.after);
    if (after) where.push(after);
  } else if (query.publishedBy !== undefined) {
    where.push(sql`l.published_at <= ${query.publishedBy}::timestamptz`);
  }
  return sql.join(where, sql` and `);
}

/** A word made only of stop words matches nothing: the page is empty at once. */
function hasWords(filters: SearchFilters): SQL {
  return filters.q === undefined ? sql`true` : sql`numnode(${TEXT_QUERY(filters.q)}) > 0`;
}

/**
 * The statement of one page. `first`: which source runs first; the other runs only when the first
 * did not answer (a walk without a page; matches too many to gather), and not at all otherwise
 * (its guard is a one-time condition). Rows come back in page order (`pos`), each with the
 * walk's and gathering's counts; with no row, one row of counts alone.
 */
function pageSql(
  query: SearchQuery,
  columns: SQL,
  limits: SearchLimits,
  first: 'walk' | 'gather' | 'walk-only',
): SQL {
  const { syncSettleMs: settleMs, walkRows, gatherRows } = limits;
  const relevance = query.sort === 'relevance';
  const sort = relevance ? 'newest' : (query.sort as Exclude<SearchSort, 'relevance'>);
  const walked = relevance
    ? walkPlan({ ...query, after: undefined }, 'newest', settleMs)
    : walkPlan(query, sort, settleMs);
  const whereWalk =
    relevance && query.publishedBy !== undefined
      ? sql`${walked.where} and l.published_at <= ${query.publishedBy}::timestamptz`
      : walked.where;
  const keep = relevance ? RELEVANCE_WINDOW : query.limit + 1;
  const matches = matchQuery(query.scope, query.filters);
  const gatherBelow = relevance ? RELEVANCE_GATHER_BELOW : keep;
  // The walk's guard, when it runs second: the gathering found too many matches.
  const walkGuard =
    matches && first === 'gather'
      ? sql`(select count(*) from gathered) > ${int(gatherRows)}`
      : sql`true`;
  // The gathering's guard, when it runs second: the walk stopped at its last row without `keep`
  // matches (a walk that ended before had every match there is).
  const gatherGuard =
    first === 'gather'
      ? sql`true`
      : first === 'walk-only'
        ? sql`false`
        : sql`(select count(*) from walk where walk.hit) < ${int(gatherBelow)}
          and exists (select 1 from walk where walk.rn = ${int(walkRows)})`;
  const gathered = matches
    ? sql`gathered as materialized (
        select m.id from listings_matching(${matches}, ${int(gatherRows + 1)}) as m(id)
        where ${hasWords(query.filters)} and ${gatherGuard}
      ),`
    : sql`gathered as materialized (select null::uuid as id where false),`;
  // The page is the gathering's when it ran and held every match there is.
  const byGather = matches
    ? sql`(${first === 'gather' ? sql`true` : gatherGuard})
        and (select count(*) from gathered) <= ${int(gatherRows)}`
    : sql`false`;
  const exact = exactConditions(query, settleMs);
  // The walk keeps its matches, its row number walkRows (it stopped there) and its last row (it
  // reached the end of the order before: `lead` looks one row ahead), so max(rn) is what it read.
  const walkCte = sql`walk as materialized (
      select w.id, w.hit, w.rn from (
        select l.id, (${walked.keep}) as hit, row_number() over walk_order as rn,
          lead(l.id) over walk_order is null as last
        from listings l
        where ${whereWalk} and ${hasWords(query.filters)} and ${walkGuard}
        window walk_order as (order by ${walked.order})
        order by ${walked.order} limit ${int(walkRows)}
      ) w
      where w.hit or w.rn = ${int(walkRows)} or w.last
      limit ${int(keep + 1)}
    )`;
  const ctes = first === 'gather' ? sql`${gathered} ${walkCte},` : sql`${walkCte}, ${gathered}`;
  const counts = sql`flags as materialized (
      select (${byGather}) as by_gather,
        (select coalesce(max(rn), 0) from walk) as walked,
        (select count(*) from gathered) as gathered
    )`;
  const page = relevance
    ? rankedPage(query, columns, exact)
    : sql`(
        select ${columns}, row_number() over (order by ${walked.order}) as pos, true as hit
        from gathered g ${byId('g')} join users u on u.id = l.seller_id
        where (select by_gather from flags) and ${exact}
        order by ${walked.order} limit ${int(query.limit + 1)}
      ) union all (
        select ${columns}, k.rn as pos, k.hit
        from walk k join listings l on l.id = k.id join users u on u.id = l.seller_id
        where not (select by_gather from flags)
      )`;
  return sql`with ${ctes} ${counts}, page as (${page})
    select f.walked, f.gathered, f.by_gather, p.*
    from flags f left join page p on true
    order by p.pos`;
}

/**
 * Relevance: the window is the newest RELEVANCE_WINDOW matches, from the gathering when it
 * answered (every match, so the newest of them), else the walk's newest matches; ranked, the
 * page after the cursor's (rank, published_at).
 */
function rankedPage(query: SearchQuery, columns: SQL, exact: SQL): SQL {
  const q = query.filters.q ?? '';
  const after = query.after
    ? sql`where (w.rank, w.published_at) < (${query.after.rank}::real, ${query.after.publishedAt}::timestamptz)`
    : sql``;
  return sql`with win as (
      (select g.id, l.published_at from gathered g ${byId('g')}
        where (select by_gather from flags) and ${exact}
        order by l.published_at desc limit ${int(RELEVANCE_WINDOW)})
      union all
      (select k.id, l.published_at from walk k join listings l on l.id = k.id
        where not (select by_gather from flags) and k.hit)
    ), w as (
      select win.id, win.published_at, ts_rank(l.search, ${TEXT_QUERY(q)}) as rank
      from win join listings l on l.id = win.id
    ), top as (
      select w.id, w.rank, w.published_at from w ${after}
      order by w.rank desc, w.published_at desc limit ${int(query.limit + 1)}
    )
    select ${columns}, top.rank::text as sort_rank,
      ${sql.raw(`to_char((select max(published_at) from w) at time zone 'UTC', ${ISO_MICROSECONDS})`)}
        as window_top,
      row_number() over (order by top.rank desc, top.published_at desc) as pos, true as hit
    from top join listings l on l.id = top.id join users u on u.id = l.seller_id`;
}

/**
 * The listing of each id in `ids` (a CTE of `id`s) as `l`, by its primary key alone: the
 * conditions applied to it afterwards (OFFSET 0 keeps them out of the lookup) can never turn
 * the join into a scan of an index they match, however few rows the statistics think there are.
 */
const byId = (ids: string) =>
  sql.raw(`join lateral (select listings.*, listings.xmin from listings
      where listings.id = ${ids}.id offset 0) l on true`);

/**
 * A search whose values are named placeholders (`sql.placeholder`), and those values by name.
 * The statement built from the first depends on the search's shape alone (its scope's kind, sort,
 * page size, which filters and how many of each list, whether it has a cursor or a window: the
 * repository's shapeOf), so it is rendered once and run with the values each time (rows.ts
 * RenderedSql): building and rendering it was about a tenth of a search page's API CPU. This holds
 * because the builders above only ever place a value in SQL (`${value}`) and never read it in
 * JavaScript (no `'status:' + status`: such joins are made in SQL).
 */
export function withPlaceholders(query: SearchQuery): {
  query: SearchQuery;
  values: Record<string, unknown>;
} {
  const values: Record<string, unknown> = {};
  // A placeholder stands where the value stood: the builders only interpolate it.
  const bind = <T>(name: string, value: T): T => {
    if (value === undefined) return value;
    values[name] = value;
    return sql.placeholder(name) as unknown as T;
  };
  const filters: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query.filters))
    filters[name] = Array.isArray(value)
      ? value.map((item: unknown, i) => bind(`${name}_${i}`, item))
      : bind(name, value);
  const { scope, after } = query;
  return {
    query: {
      ...query,
      scope:
        scope.kind === 'public'
          ? scope
          : {
              ...scope,
              sellerId: bind('scope_seller', scope.sellerId),
              environment: bind('scope_environment', scope.environment),
            },
      filters: filters as SearchFilters,
      after: after && {
        publishedAt: bind('after_published_at', after.publishedAt),
        priceCents: bind('after_price_cents', after.priceCents),
        updatedAt: bind('after_updated_at', after.updatedAt),
        id: bind('after_id', after.id),
        rank: bind('after_rank', after.rank),
      },
      publishedBy: bind('published_by', query.publishedBy),
    },
    values,
  };
}

/**
 * A page's statement: walking first, gathering first (a search found sparse lately), or walking
 * only (one found too common to gather). Rows come in page order, each with the counts.
 */
export function searchStatement(
  query: SearchQuery,
  limits: SearchLimits,
  first: 'walk' | 'gather' | 'walk-only',
): SQL {
  const columns = sql`${COLUMNS}, ${VERSIONS}${
    query.sort === 'relevance' ? sql`` : sql`, null::text as sort_rank, null::text as window_top`
  }`;
  return pageSql(query, columns, limits, first);
}
