/**
 * Listings SQL. Raw SQL where the shape matters: keyset pages on the feed indexes, one
 * set-based insert for any number of items, microsecond timestamps formatted by PostgreSQL
 * (a JavaScript Date would drop the microseconds that make published_at a correct cursor).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orderingKeys } from '../db/ordering-key.ts';
import { isoColumn, queryRows, Statement } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import type { Environment, ListingStatus } from '../generated/schemas.ts';
import type { RecordInStatement } from './listing-changes.ts';
import type { FeedScope } from '../access.ts';

/** The writable fields, as stored. */
export interface ListingFields {
  title: string;
  description: string | null;
  category: string | null;
  condition: string | null;
  brand: string | null;
  size: string | null;
  color: string | null;
  price_cents: number;
  currency: string;
  impact_mode: boolean;
  cover_image_url: string | null;
  image_urls: string[];
  tags: string[];
}

/** A listing row with its seller, timestamps as RFC 3339 strings with six fractional digits. */
export interface ListingRow extends ListingFields {
  id: string;
  seller_id: string;
  app_id: string | null;
  environment: Environment;
  status: ListingStatus;
  like_count: number;
  external_id: string | null;
  published_at: string;
  created_at: string;
  updated_at: string;
  seller_username: string;
  seller_display_name: string;
  seller_avatar_url: string | null;
}

/**
 * What a listing's answers are validated by (ETags, listings-read-service.ts): the row's and its
 * seller's stored versions (PostgreSQL's xmin: every update of a row writes a new one) and the
 * facts its visibility and view depend on.
 */
export interface RowVersion {
  id: string;
  seller_id: string;
  environment: Environment;
  status: ListingStatus;
  row_version: string;
  seller_version: string;
}

export interface NewListing extends ListingFields {
  status: ListingStatus;
  external_id: string | null;
}

/** A keyset page: `limit` rows published before `cursor` (a published_at), maybe of one status. */
export interface PageQuery {
  limit: number;
  cursor?: string | undefined;
  status?: ListingStatus | undefined;
}

export interface InsertOptions {
  /**
   * Records the inserted listings' changes (the outbox) in the insert statement itself: see
   * ListingChanges.inStatement. Without it the caller announces them in its transaction.
   */
  recordChanges?: RecordInStatement | undefined;
}

/** A row's and its seller's stored versions (RowVersion), added to the full columns. */
export const VERSIONS = sql.raw('l.xmin::text as row_version, u.xmin::text as seller_version');
/** RowVersion alone: what a conditional GET is answered from. */
const VERSION_COLUMNS = sql`l.id, l.seller_id, l.environment, l.status, ${VERSIONS}`;

export const COLUMNS = sql.join(
  [
    sql.raw(
      'l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, ' +
        'l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, ' +
        'l.tags, l.like_count, l.external_id',
    ),
    isoColumn('l.published_at', 'published_at'),
    isoColumn('l.created_at', 'created_at'),
    isoColumn('l.updated_at', 'updated_at'),
    sql.raw(
      'u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url',
    ),
  ],
  sql.raw(', '),
);

/**
 * The owner's view of a row of `inserted` (named as ListingRow) as json, for changes recorded in
 * the insert statement itself: it mirrors listingView(row, true) in listing-view.ts, field
 * for field and in the same order (test/webhooks/events.test.ts compares the two, text and all).
 */
const OWNER_VIEW_JSON = sql.raw(
  `json_build_object('id', r.id, 'title', r.title, 'description', r.description, 'category', r.category,
    'condition', r.condition, 'price_cents', r.price_cents, 'currency', r.currency, 'status', r.status,
    'impact_mode', r.impact_mode, 'cover_image_url', r.cover_image_url, 'like_count', r.like_count,
    'published_at', r.published_at,
    'seller', json_build_object('id', r.seller_id, 'username', r.seller_username, 'display_name', r.seller_display_name,
      'avatar_url', r.seller_avatar_url),
    'brand', r.brand, 'size', r.size, 'color', r.color, 'tags', r.tags, 'image_urls', r.image_urls,
    'created_at', r.created_at, 'updated_at', r.updated_at, 'external_id', r.external_id, 'api_environment', r.environment)`,
);

/** The JSON record type the set-based insert reads its items from. */
const ITEM_RECORD = sql.raw(
  'ord int, status text, title text, description text, category text, condition text, brand text, size text, ' +
    'color text, price_cents int, currency text, impact_mode boolean, cover_image_url text, image_urls text[], ' +
    'tags text[], external_id text',
);

const FIELD_COLUMNS = [
  'title',
  'description',
  'category',
  'condition',
  'brand',
  'size',
  'color',
  'price_cents',
  'currency',
  'impact_mode',
  'cover_image_url',
  'image_urls',
  'tags',
] as const satisfies readonly (keyof ListingFields)[];

/*
 * The hot reads as statements rendered once (src/db/rows.ts Statement): their text never
 * changes, only their values.
 *
 * A listing by id is listings_pkey, then its seller by users_pkey, whatever the statistics say
 * (src/db/unique-lookups.ts): the seller is joined by `unindexed(l.seller_id)`, so no index
 * leading with seller_id can start the plan from the users side.
 */
const SELLER_OF_L = sql`join users u on u.id = ${unindexed('l.seller_id')}`;
const byId = (lock: SQL) =>
  new Statement<{ id: string }>(
    sql`select ${COLUMNS}, ${VERSIONS} from listings l ${SELLER_OF_L}
        where l.id = ${sql.placeholder('id')} ${lock}`,
  );
const BY_ID = byId(sql``);
const BY_ID_FOR_UPDATE = byId(sql`for update of l`);
const VERSION_BY_ID = new Statement<{ id: string }>(
  sql`select ${VERSION_COLUMNS} from listings l ${SELLER_OF_L}
      where l.id = ${sql.placeholder('id')}`,
);

/**
 * Each id is its own equality on the unique (seller, environment, external_id) index, in a
 * LATERAL subquery that `limit 1` keeps from being flattened into a join: see findByExternalIds.
 */
const byExternalIds = (lock: SQL) =>
  new Statement<{ externalIds: string; sellerId: string; environment: Environment }>(
    sql`select ${COLUMNS}
        from jsonb_array_elements_text(${sql.placeholder('externalIds')}::jsonb) with ordinality as x(external_id, n)
        cross join lateral (
          select * from listings
          where external_id = x.external_id
            and ${unindexed('seller_id')} = ${sql.placeholder('sellerId')}
            and ${unindexed('environment')} = ${sql.placeholder('environment')}
          limit 1
        ) l
        join users u on u.id = l.seller_id
        order by x.n
        ${lock}`,
  );
const BY_EXTERNAL_IDS = byExternalIds(sql``);
const BY_EXTERNAL_IDS_FOR_UPDATE = byExternalIds(sql`for update of l`);

type PageValues = {
  sellerId: string | null;
  environment: Environment | null;
  cursor: string | null;
  status: ListingStatus | null;
  limit: number;
};

function pageValues(scope: FeedScope, query: PageQuery): PageValues {
  const seller = scope.kind === 'public' ? null : scope;
  return {
    sellerId: seller?.sellerId ?? null,
    environment: seller?.environment ?? null,
    cursor: query.cursor ?? null,
    status: query.status ?? null,
    limit: query.limit + 1,
  };
}

/** A page statement per shape (scope, cursor or not, status filter or not, columns): 16 at most. */
const PAGE_STATEMENTS = new Map<string, Statement<PageValues>>();

/**
 * One keyset page, newest published_at first; fetches limit + 1 to know whether more exist.
 * `nulls last` matches the feed indexes (`published_at DESC NULLS LAST`): plain `desc` means
 * NULLS FIRST, which those indexes cannot deliver in order, and the planner would sort instead.
 */
function pageStatement(
  scope: FeedScope,
  query: PageQuery,
  columns: 'rows' | 'versions',
): Statement<PageValues> {
  const cursor = query.cursor !== undefined;
  const status = query.status !== undefined;
  const shape = `${scope.kind === 'public' ? 'public' : 'seller'}|${cursor}|${status}|${columns}`;
  let statement = PAGE_STATEMENTS.get(shape);
  if (!statement) {
    const where: SQL[] =
      scope.kind === 'public'
        ? [sql`l.environment = 'live'`, sql`l.status = 'active'`]
        : [
            sql`l.seller_id = ${sql.placeholder('sellerId')}`,
            sql`l.environment = ${sql.placeholder('environment')}`,
          ];
    if (cursor) where.push(sql`l.published_at < ${sql.placeholder('cursor')}::timestamptz`);
    // A filter on the seller feed's index (seller, environment, published_at): still one ordered
    // scan.
    if (status) where.push(sql`l.status = ${sql.placeholder('status')}`);
    statement = new Statement<PageValues>(
      sql`select ${columns === 'rows' ? sql`${COLUMNS}, ${VERSIONS}` : VERSION_COLUMNS}
          from listings l join users u on u.id = l.seller_id
          where ${sql.join(where, sql` and `)}
          order by l.published_at desc nulls last limit ${sql.placeholder('limit')}`,
    );
    PAGE_STATEMENTS.set(shape, statement);
  }
  return statement;
}

export class ListingsRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * One keyset page, newest published_at first; fetches limit + 1 to know whether more exist.
   * `nulls last` matches the feed indexes (`published_at DESC NULLS LAST`): plain `desc` means
   * NULLS FIRST, which those indexes cannot deliver in order, and the planner would sort instead.
   */
  async page(
    scope: FeedScope,
    query: PageQuery,
    tx: Db = this.db,
  ): Promise<(ListingRow & RowVersion)[]> {
    return pageStatement(scope, query, 'rows').rows(tx, pageValues(scope, query));
  }

  /** The same page's rows, their versions only: what a conditional GET is answered from. */
  async pageVersions(scope: FeedScope, query: PageQuery): Promise<RowVersion[]> {
    return pageStatement(scope, query, 'versions').rows(this.db, pageValues(scope, query));
  }

  async findById(
    id: string,
    options: { forUpdate?: boolean } = {},
    tx: Db = this.db,
  ): Promise<(ListingRow & RowVersion) | undefined> {
    const statement = options.forUpdate ? BY_ID_FOR_UPDATE : BY_ID;
    const [row] = await statement.rows<ListingRow & RowVersion>(tx, { id });
    return row;
  }

  /** A listing's versions only: what a conditional GET is answered from. */
  async versionById(id: string): Promise<RowVersion | undefined> {
    const [row] = await VERSION_BY_ID.rows<RowVersion>(this.db, { id });
    return row;
  }

  /**
   * The seller's listings with these external ids (upserts, idempotent replays), in external_id
   * order; with `forUpdate`, locked in that order (two writers lock overlapping sets alike).
   *
   * Each id is its own equality on the unique (seller, environment, external_id) index, in a
   * LATERAL subquery that `limit 1` keeps from being flattened into a join: the plan is one index
   * seek per id whatever the seller's inventory and whatever the statistics say. The earlier
   * `external_id = any(...) order by external_id` let the planner scan the seller's rows in
   * index order with external_id as a filter when its estimates were off (72 ms, and 47 req/s
   * on a mixed load, for a seller with 152,000 listings): test/listings/external-id-lookup.test.ts.
   */
  async findByExternalIds(
    owner: { sellerId: string; environment: Environment },
    externalIds: string[],
    options: { forUpdate?: boolean } = {},
    tx: Db = this.db,
  ): Promise<ListingRow[]> {
    if (externalIds.length === 0) return [];
    const sorted = [...new Set(externalIds)].sort();
    return (options.forUpdate ? BY_EXTERNAL_IDS_FOR_UPDATE : BY_EXTERNAL_IDS).rows<ListingRow>(tx, {
      externalIds: JSON.stringify(sorted),
      ...owner,
    });
  }

  /**
   * Inserts the items in one statement, in index order (their published_at rise with the index:
   * ordering keys that cannot clash, src/db/ordering-key.ts; the feed shows them newest first).
   * An item whose external_id already exists is skipped (ON CONFLICT DO NOTHING) and simply
   * missing from the result: the caller upserts it instead.
   *
   * With `recordChanges`, the statement also records the inserted listings' changes from a CTE
   * `changed` (changedCte): one statement, atomic on its own, so such a create needs no
   * transaction around it.
   */
  async insertMany(
    owner: { sellerId: string; appId: string | null; environment: Environment },
    items: NewListing[],
    options: InsertOptions = {},
    tx: Db = this.db,
  ): Promise<(ListingRow & { ord: number })[]> {
    if (items.length === 0) return [];
    const itemsJson = JSON.stringify(items.map((item, ord) => ({ ord, ...item })));
    const recordingCtes = options.recordChanges?.('changed') ?? [];
    const changedCtes = recordingCtes.length ? changedCte('inserted', recordingCtes) : sql``;
    return queryRows<ListingRow & { ord: number }>(
      tx,
      sql`with x as (
            select * from jsonb_to_recordset(${itemsJson}::jsonb) as x(${ITEM_RECORD})
          ), ${orderingKeys('keys', 'listings_published_seq', sql`(select count(*)::int from x)`)}, ins as (
            insert into listings (seller_id, app_id, environment, status, title, description, category, condition,
              brand, size, color, price_cents, currency, impact_mode, cover_image_url, image_urls, tags,
              external_id, published_at, created_at, updated_at)
            select ${owner.sellerId}, ${owner.appId}, ${owner.environment}, x.status, x.title, x.description,
              x.category, x.condition, x.brand, x.size, x.color, x.price_cents, x.currency, x.impact_mode,
              x.cover_image_url, coalesce(x.image_urls, '{}'), coalesce(x.tags, '{}'), x.external_id,
              keys.at, keys.at, keys.at
            from x join keys on keys.k = x.ord
            order by x.ord
            on conflict (seller_id, environment, external_id) where external_id is not null do nothing
            returning *
          ), inserted as (
            select keys.k as ord, ${COLUMNS}
            from ins l join keys on keys.at = l.published_at
            join users u on u.id = l.seller_id
          )${changedCtes}
          select * from inserted`,
    );
  }

  /**
   * Writes fields and status to one listing of `target`'s seller and environment, in one
   * statement, if the state machine's rules allow it (state-machine.ts; the statement's
   * conditions mirror states.update and states.archive): the listing is not archived, and if it
   * is active after the write it has a photo. Returns the updated row, or undefined when nothing
   * was written: no such listing of this owner, or a rule refused (the caller reads the row to
   * say which).
   *
   * UPDATE evaluates its conditions on the row's latest committed version (it waits for a
   * concurrent writer's commit and checks again), so no SELECT ... FOR UPDATE round trip comes
   * first. With `recordChanges`, the statement also records the change (the outbox), as
   * insertMany does: a PATCH, an upsert or a DELETE is then one statement.
   *
   * The row is found by listings_pkey alone: seller and environment are checked through
   * `unindexed` (src/db/unique-lookups.ts), so no seller index can be chosen instead.
   */
  async updateListing(
    target: ListingTarget,
    changes: ListingWrite,
    options: InsertOptions = {},
    tx: Db = this.db,
  ): Promise<ListingRow | undefined> {
    const recordingCtes = options.recordChanges?.('changed') ?? [];
    const [row] = await queryRows<ListingRow>(
      tx,
      sql`with upd as (
            update listings l set ${sql.join(setClauses(changes), sql`, `)}
            where l.id = ${target.id} and ${unindexed('l.seller_id')} = ${target.sellerId}
              and ${unindexed('l.environment')} = ${target.environment}
              and l.status <> 'archived' and ${photoRule(changes)}
            returning l.*
          ), updated as (
            select 0 as ord, ${COLUMNS} from upd l join users u on u.id = l.seller_id
          )${recordingCtes.length ? changedCte('updated', recordingCtes) : sql``}
          select * from updated`,
    );
    return row;
  }
}

/** The listing an update applies to: by id, and only if it is this seller's in this environment. */
export interface ListingTarget {
  id: string;
  sellerId: string;
  environment: Environment;
}

/** An update's fields and status; undefined: left as stored. */
export type ListingWrite = Partial<ListingFields> & {
  status?: ListingStatus | undefined;
  external_id?: string | undefined;
};

/**
 * The CTE `changed` of a statement's changed rows (the CTE `source`, named as ListingRow, with
 * `ord`), in the shape the outbox's CTEs read (ListingChangesStatementListener), then those CTEs.
 */
function changedCte(source: string, recordingCtes: SQL[]): SQL {
  return sql`, changed as (select r.ord, json_build_object('listing', ${OWNER_VIEW_JSON}) as data, r.id as listing_id,
      r.seller_id, r.app_id
    from ${sql.identifier(source)} r)${sql.join(recordingCtes)}`;
}

function setClauses(changes: ListingWrite): SQL[] {
  const sets: SQL[] = [sql`updated_at = now()`];
  for (const column of [...FIELD_COLUMNS, 'status', 'external_id'] as const) {
    const value = changes[column];
    if (value === undefined) continue;
    // A JS array in a sql template expands to a parameter list, not an array: send it as JSON.
    const isArray = column === 'image_urls' || column === 'tags';
    sets.push(
      isArray
        ? sql`${sql.identifier(column)} = array(select e.v from jsonb_array_elements_text(${JSON.stringify(value)}::jsonb)
              with ordinality as e(v, n) order by e.n)`
        : sql`${sql.identifier(column)} = ${value}`,
    );
  }
  return sets;
}

/**
 * "An active listing needs a photo" as a condition on the row being updated: what the write
 * sets is known here, what it leaves comes from the row.
 */
function photoRule(changes: ListingWrite): SQL {
  const cover =
    changes.cover_image_url === undefined
      ? sql`l.cover_image_url is not null`
      : sql.raw(String(changes.cover_image_url !== null));
  const images =
    changes.image_urls === undefined
      ? sql`cardinality(l.image_urls) > 0`
      : sql.raw(String(changes.image_urls.length > 0));
  const active =
    changes.status === undefined
      ? sql`l.status = 'active'`
      : sql.raw(String(changes.status === 'active'));
  return sql`(not ${active} or ${cover} or ${images})`;
}
