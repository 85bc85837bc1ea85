/**
 * Listing reads: the feed and its searches (GET /listings), one listing (GET /listings/{id}),
 * the portal's sandbox inventory, and the conditional reads that answer 304 from the listings'
 * versions alone (etags.ts). Who sees what is src/access.ts's; this file only asks.
 */
import type { Static } from '@sinclair/typebox';
import {
  assertCanSee,
  feedScope,
  isOwner,
  mayReadBehind,
  ownerViewScope,
  type Caller,
  type FeedScope,
} from '../access.ts';
import { ServiceUnavailableError, ValidationError } from '../errors.ts';
import { isStatementTimeout } from '../db/errors.ts';
import type { ReadRouting } from '../db/replica.ts';
import { LISTING_STATUS_VALUES } from '../generated/constants.ts';
import { operations } from '../generated/operations.ts';
import type { Listing, ListingStatus } from '../generated/schemas.ts';
import type { ListingsRepository, PageQuery, RowVersion } from './listings-repository.ts';
import type { ListingsSearchRepository } from './listings-search-repository.ts';
import type { SearchFilters } from './search-filters.ts';
import type { SearchQuery, SearchVersion } from './search-statement.ts';
import { isTimestamp } from '../lib/timestamps.ts';
import {
  decodeCursor,
  encodeCursor,
  queryDigest,
  type SearchSort,
  type SortKey,
} from './listing-cursor.ts';
import { access, listingView, type RowAccess } from './listing-view.ts';
import { etagOf, matchesAny } from './etags.ts';

export const LISTING_STATUSES = LISTING_STATUS_VALUES;
/**
 * A page's size when the caller names none: the document's default for the `limit` parameter
 * of GET /listings (read from the generated schema, so the two cannot drift apart).
 */
export const DEFAULT_PAGE_SIZE = documentedDefault(
  operations.listListings.schema.querystring.properties.limit.default,
);
/** At most this many words in `q` (OpenAPI "Search and sync"). */
const MAX_QUERY_WORDS = 8;
/**
 * A word of `q` as PostgreSQL's default text search parser reads words (wparser_def.c): a run
 * of letters and digits; anything else parts words, punctuation (`w0,w1`) and invisible
 * characters (`w0\u200bw1`) as much as spaces. Each such word is what the parser makes one
 * term of (two for a hyphenated word's parts and whole), so the search's tsquery is bounded by
 * the words counted here. Letters are Unicode's; digits ASCII only (the parser reads `²` as no
 * digit, so it parts words here too). Stop words count: the rule needs no dictionary.
 */
const QUERY_WORD = /[\p{L}0-9]+/gu;

/** GET /listings' query, as validated against the document. */
export type ListQuery = Partial<Static<typeof operations.listListings.schema.querystring>>;

/** One seller's listings in one environment: the seller's key's feed (see feedScope). */
export type SellerScope = Extract<FeedScope, { kind: 'seller' }>;

export interface ListingPage {
  items: Listing[];
  /** The next page's cursor, or null on the last page. */
  nextCursor: string | null;
  /** The answer's strong validator (etags.ts). */
  etag: string;
  /**
   * Searches only: the listing rows its statement read (index entries walked and rows fetched),
   * what the cost-aware rate limit charges (OpenAPI "Rate limits"). Absent on the plain feed.
   */
  rowsRead?: number;
}

/**
 * The repositories a read runs on: over the primary's pool, or over a read replica's for a read
 * that may be behind (src/db/replica.ts ReadRouting chooses).
 */
export interface ListingReadSource {
  listings: ListingsRepository;
  search: ListingsSearchRepository;
}

/** A search as the repository runs it, with what its cursor and ETag are made of. */
interface PlannedSearch {
  query: SearchQuery;
  digest: string;
  owns: (row: RowAccess) => boolean;
  environment: string;
  /** Whether it may be served by a replica (behind). */
  mayBeBehind: boolean;
}

/**
 * What makes GET /listings a search, the one definition of it: the search gate
 * (src/listings/search-gate-plugin.ts, around the listListings handler) and this service's
 * choice between the plain feed and a search both read isSearch, and a search page is what the
 * cost-aware rate limit charges by its rows (search-charge.ts). The search parameters are read
 * from the document: all of the operation's but the page's own (`limit`, `cursor`) and `sort`,
 * which makes a search unless it is the feed's `newest`; so a parameter added to the operation
 * is a search parameter without another edit.
 */
const PAGE_PARAMETERS = ['limit', 'cursor', 'sort'] as const;
type SearchParameter = Exclude<keyof ListQuery, (typeof PAGE_PARAMETERS)[number]>;
const SEARCH_PARAMETERS = Object.keys(operations.listListings.schema.querystring.properties).filter(
  (name) => !(PAGE_PARAMETERS as readonly string[]).includes(name),
) as readonly SearchParameter[];

/** Whether GET /listings with this (validated) query is a search rather than the plain feed. */
export function isSearch(query: ListQuery): boolean {
  if (query.sort !== undefined && query.sort !== 'newest') return true;
  return SEARCH_PARAMETERS.some((name) => query[name] !== undefined);
}

export class ListingsReadService {
  constructor(private readonly sources: ReadRouting<ListingReadSource>) {}

  /**
   * GET /listings: the caller's feed (feedScope), the owner's view of the caller's own listings;
   * with a search parameter, that search (OpenAPI "Search and sync").
   */
  async list(caller: Caller, query: ListQuery): Promise<ListingPage> {
    if (!isSearch(query)) {
      const scope = feedScope(caller);
      return this.page(
        scope,
        feedPage(query, scope),
        (row) => isOwner(caller, access(row)),
        caller.environment,
        mayReadBehind(caller),
      );
    }
    const search = planSearch(caller, query);
    const found = await this.searched(() =>
      this.sources.run(search.mayBeBehind, (from) => from.search.page(search.query)),
    );
    const { limit } = search.query;
    const page = found.rows.slice(0, limit);
    // A page full, more follow; a walk that ran out first (short page), resume where it stopped.
    const after = found.rows.length > limit ? page[page.length - 1] : found.resumeAfter;
    const nextCursor = after ? cursorAfter(search, after) : null;
    return {
      items: page.map((row) => listingView(row, search.owns(row))),
      nextCursor,
      etag: searchEtag(search, found.rows, nextCursor),
      rowsRead: found.rowsRead,
    };
  }

  /**
   * A conditional GET /listings of the plain feed: the ETag the page would carry, if
   * If-None-Match names it (the answer is then 304), else null. Reads the page's versions only.
   * A search has no such read: its one statement answers the page, whose ETag the route compares
   * (list), so a stale If-None-Match never runs a search twice.
   */
  async listUnchanged(
    caller: Caller,
    query: ListQuery,
    ifNoneMatch: string,
  ): Promise<string | null> {
    if (isSearch(query)) return null;
    const scope = feedScope(caller);
    const page = feedPage(query, scope);
    const versions = await this.sources.run(mayReadBehind(caller), (from) =>
      from.listings.pageVersions(scope, page),
    );
    const etag = pageEtag(
      versions,
      page.limit,
      (row) => isOwner(caller, access(row)),
      caller.environment,
    );
    return matchesAny(ifNoneMatch, etag) ? etag : null;
  }

  /**
   * A seller's inventory in one environment (the portal's sandbox inventory): exactly that
   * seller's key's feed on GET /listings (every status), optionally one status only. The query
   * comes from a page's URL, so it is checked here as the document checks GET /listings'.
   */
  async sellerInventory(
    seller: SellerScope,
    query: { status?: string | undefined; limit?: number | undefined; cursor?: string | undefined },
  ): Promise<ListingPage> {
    const { status, cursor, limit = DEFAULT_PAGE_SIZE } = query;
    if (status !== undefined && !(LISTING_STATUSES as readonly string[]).includes(status)) {
      throw ValidationError.field('/query/status', `must be one of ${LISTING_STATUSES.join(', ')}`);
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw ValidationError.field('/query/limit', 'must be an integer from 1 to 100');
    if (cursor !== undefined && !isTimestamp(cursor))
      throw ValidationError.field('/query/cursor', 'must be an ISO 8601 timestamp');
    // Every listing of a seller scope is the seller's own: the owner's view throughout.
    return this.page(
      seller,
      { status: status as ListingStatus | undefined, cursor, limit },
      () => true,
      seller.environment,
      false,
    );
  }

  /**
   * One keyset page of the feed and its cursor; `owns` says which rows get the owner's view,
   * `mayBeBehind` whether a replica may serve it.
   */
  private async page(
    scope: FeedScope,
    query: PageQuery,
    owns: (row: RowAccess) => boolean,
    environment: string,
    mayBeBehind: boolean,
  ): Promise<ListingPage> {
    const rows = await this.sources.run(mayBeBehind, (from) => from.listings.page(scope, query));
    const page = rows.slice(0, query.limit);
    return {
      items: page.map((row) => listingView(row, owns(row))),
      nextCursor: rows.length > query.limit ? page[page.length - 1]!.published_at : null,
      etag: pageEtag(rows, query.limit, owns, environment),
    };
  }

  /** A search that ran out of its time answers 503 with advice, not a slow page (bounded work). */
  private async searched<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (!isStatementTimeout(err)) throw err;
      throw new ServiceUnavailableError(
        'This search took too long. Narrow it with more words or filters, or another sort.',
      );
    }
  }

  async get(caller: Caller, id: string): Promise<{ listing: Listing; etag: string }> {
    const row = await this.sources.run(mayReadBehind(caller), (from) => from.listings.findById(id));
    assertCanSee(caller, row && access(row));
    const owner = isOwner(caller, access(row!));
    return {
      listing: listingView(row!, owner),
      etag: listingEtag(row!, owner, caller.environment),
    };
  }

  /**
   * A conditional GET /listings/{id}: the ETag, if If-None-Match names it (304), else null. A
   * listing the caller may not see is 404 as always.
   */
  async getUnchanged(caller: Caller, id: string, ifNoneMatch: string): Promise<string | null> {
    const version = await this.sources.run(mayReadBehind(caller), (from) =>
      from.listings.versionById(id),
    );
    assertCanSee(caller, version && access(version));
    const etag = listingEtag(version!, isOwner(caller, access(version!)), caller.environment);
    return matchesAny(ifNoneMatch, etag) ? etag : null;
  }
}

/**
 * The plain feed's page: its cursor is a published_at (OpenAPI "Pagination"), checked here for
 * the page and its conditional read alike, before any statement reads it.
 */
function feedPage(query: ListQuery, scope: FeedScope): PageQuery {
  if (query.cursor !== undefined && !isTimestamp(query.cursor))
    throw ValidationError.field('/query/cursor', 'must be an RFC 3339 date-time');
  const status = scope.kind === 'seller' && scope.onlyActive ? 'active' : undefined;
  return { limit: query.limit ?? DEFAULT_PAGE_SIZE, cursor: query.cursor, status };
}

/**
 * GET /listings' search parameters checked together (each alone was checked against the
 * document) and turned into the repository's query: the scope (the owner view for `seller=me`),
 * the filters, the order and where the page starts.
 */
function planSearch(caller: Caller, query: ListQuery): PlannedSearch {
  const sort: SearchSort = query.sort ?? 'newest';
  const ownerView = query.seller === 'me';
  if (query.status !== undefined && !ownerView)
    throw ValidationError.field('/query/status', 'is allowed only with seller=me');
  if (sort === 'relevance' && query.q === undefined)
    throw ValidationError.field('/query/sort', 'relevance needs q');
  if (query.updated_since !== undefined && sort !== 'updated_at')
    throw ValidationError.field('/query/updated_since', 'is allowed only with sort=updated_at');
  if (query.updated_since !== undefined && !isTimestamp(query.updated_since))
    throw ValidationError.field('/query/updated_since', 'must be an RFC 3339 date-time');
  checkSearchValues(query, '/query');

  // seller=me: 401 without a credential, 403 without listings:write (src/access.ts).
  const scope: FeedScope = ownerView ? ownerViewScope(caller) : feedScope(caller);
  // A sandbox key without listings:write searches its active listings only (feedScope).
  const onlyActive = scope.kind === 'seller' && scope.onlyActive ? 'active' : undefined;
  const filters: SearchFilters = {
    q: query.q,
    category: query.category,
    condition: query.condition && [...query.condition].sort(),
    tag: query.tag && [...new Set(query.tag)].sort(),
    brand: query.brand,
    size: query.size,
    color: query.color,
    minPriceCents: query.min_price_cents,
    maxPriceCents: query.max_price_cents,
    impactMode: query.impact_mode,
    sellerUsername: ownerView ? undefined : query.seller,
    status: query.status ?? onlyActive,
    updatedSince: query.updated_since,
  };
  const digest = queryDigest({
    scope: scope.kind === 'public' ? 'public' : scope.environment,
    me: ownerView,
    filters,
    sort,
  });
  const state = query.cursor === undefined ? undefined : decodeCursor(query.cursor, digest, sort);
  return {
    query: {
      scope,
      filters,
      sort,
      limit: query.limit ?? DEFAULT_PAGE_SIZE,
      after: state?.key,
      publishedBy: state?.publishedBy,
    },
    digest,
    owns: ownerView ? () => true : (row) => isOwner(caller, access(row)),
    environment: caller.environment,
    // Never a sync page: its promise that no change falls behind its cursor (SYNC_SETTLE_MS)
    // holds where commits become visible when they happen, not on a replica replaying them later.
    mayBeBehind: mayReadBehind(caller) && sort !== 'updated_at',
  };
}

/**
 * The checks of GET /listings' search values that a field alone cannot make, shared with saved
 * searches (their body has the same names: `at` is where they are, `/query` or ``).
 */
export function checkSearchValues(
  values: Pick<ListQuery, 'q' | 'min_price_cents' | 'max_price_cents'>,
  at: string,
): void {
  const { q, min_price_cents: min, max_price_cents: max } = values;
  if (min !== undefined && max !== undefined && min > max)
    throw ValidationError.field(`${at}/min_price_cents`, 'must not be above max_price_cents');
  if (q !== undefined && (q.match(QUERY_WORD)?.length ?? 0) > MAX_QUERY_WORDS)
    throw ValidationError.field(`${at}/q`, `must have at most ${MAX_QUERY_WORDS} words`);
}

/** The cursor of the page that follows `last` in the search's order. */
function cursorAfter(search: PlannedSearch, last: SearchVersion): string {
  return encodeCursor(search.digest, {
    key: sortKey(search.query.sort, last),
    // Relevance: the first page's window keeps to what was published by then.
    publishedBy: search.query.publishedBy ?? last.window_top ?? undefined,
  });
}

function sortKey(sort: SearchSort, row: SearchVersion): SortKey {
  switch (sort) {
    case 'newest':
      return { publishedAt: row.published_at };
    case 'price_asc':
    case 'price_desc':
      return { priceCents: row.price_cents, publishedAt: row.published_at };
    case 'updated_at':
      return { updatedAt: row.updated_at, id: row.id };
    case 'relevance':
      return { rank: row.sort_rank ?? undefined, publishedAt: row.published_at };
  }
}

/** Fails at load, not on a request, if the document's `limit` loses its default. */
function documentedDefault(value: unknown): number {
  if (typeof value !== 'number')
    throw new Error('openapi.yaml: the limit parameter of GET /listings has no numeric default');
  return value;
}

/**
 * A page's ETag from its limit + 1 rows (the last one only says that more follow); a searched
 * page's also from its `query` (the plain feed's cursor follows from its rows).
 */
function pageEtag(
  rows: readonly RowVersion[],
  limit: number,
  owns: (row: RowAccess) => boolean,
  environment: string,
  query?: string,
): string {
  return etagOf({
    kind: 'page',
    environment,
    rows: rows.slice(0, limit).map((version) => ({ version, owner: owns(version) })),
    more: rows.length > limit,
    ...(query === undefined ? {} : { query }),
  });
}

/** A searched page's ETag: its rows, and its next cursor (which names the query and order). */
function searchEtag(
  search: PlannedSearch,
  rows: readonly RowVersion[],
  nextCursor: string | null,
): string {
  const { limit } = search.query;
  const query = `${search.digest}:${nextCursor ?? ''}`;
  return pageEtag(rows, limit, search.owns, search.environment, query);
}

function listingEtag(version: RowVersion, owner: boolean, environment: string): string {
  return etagOf({ kind: 'listing', environment, rows: [{ version, owner }] });
}
