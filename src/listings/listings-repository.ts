/**
 * Listings SQL. Raw SQL where the shape matters: keyset pages on the feed indexes, one
 * set-based insert for any number of items, microsecond timestamps formatted by PostgreSQL
 * (a JavaScript Date would drop the microseconds that make published_at a correct cursor).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orderingKeys } from '../db/ordering-key.ts';
import { isoColumn, queryRows, RenderedSql } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import type { Environment, ListingStatus } from '../generated/schemas.ts';
import type { ListingEventType } from './state-machine.ts';
import { QUEUED_LANES, type ListingChanges, type QueuedLanes } from './listing-changes.ts';
import { OWNER_VIEW_JSON } from './listing-view.ts';
import type { FeedScope } from '../access.ts';
import type { ListingFields, ListingRow, NewListing, RowVersion } from './listing-row.ts';

export type { ListingRow, NewListing, RowVersion } from './listing-row.ts';

/** A keyset page: `limit` rows published before `cursor` (a published_at), maybe of one status. */
export interface PageQuery {
  limit: number;
  cursor?: string | undefined;
  status?: ListingStatus | undefined;
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
 * The hot reads as statements rendered once (src/db/rows.ts RenderedSql): their text never
 * changes, only their values.
 *
 * A listing by id is listings_pkey, then its seller by users_pkey, whatever the statistics say
 * (src/db/unique-lookups.ts): the seller is joined by `unindexed(l.seller_id)`, so no index
 * leading with seller_id can start the plan from the users side.
 */
const SELLER_OF_L = sql`join users u on u.id = ${unindexed('l.seller_id')}`;
const BY_ID = new RenderedSql<{ id: string }>(
  sql`select ${COLUMNS}, ${VERSIONS} from listings l ${SELLER_OF_L}
      where l.id = ${sql.placeholder('id')}`,
);
const VERSION_BY_ID = new RenderedSql<{ id: string }>(
  sql`select ${VERSION_COLUMNS} from listings l ${SELLER_OF_L}
      where l.id = ${sql.placeholder('id')}`,
);

/**
 * Each id is its own equality on the unique (seller, environment, external_id) index, in a
 * LATERAL subquery that `limit 1` keeps from being flattened into a join: see findByExternalIds.
 */
const BY_EXTERNAL_IDS = new RenderedSql<{
  externalIds: string;
  sellerId: string;
  environment: Environment;
}>(
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
      order by x.n`,
);

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
const PAGE_STATEMENTS = new Map<string, RenderedSql<PageValues>>();

/**
 * One keyset page, newest published_at first; fetches limit + 1 to know whether more exist.
 * `nulls last` matches the feed indexes (`published_at DESC NULLS LAST`): plain `desc` means
 * NULLS FIRST, which those indexes cannot deliver in order, and the planner would sort instead.
 */
function pageStatement(
  scope: FeedScope,
  query: PageQuery,
  columns: 'rows' | 'versions',
): RenderedSql<PageValues> {
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
    statement = new RenderedSql<PageValues>(
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

  /**
   * One keyset page, newest published_at first; fetches limit + 1 to know whether more exist.
   * `nulls last` matches the feed indexes (`published_at DESC NULLS LAST`): plain `desc` means
   * NULLS FIRST, which those indexes cannot deliver in order, and the planner would sort instead.
   */
  async page(scope: FeedScope, query: PageQuery): Promise<(ListingRow & RowVersion)[]> {
    return pageStatement(scope, query, 'rows').rows(this.db, pageValues(scope, query));
  }

  /** The same page's rows, their versions only: what a conditional GET is answered from. */
  async pageVersions(scope: FeedScope, query: PageQuery): Promise<RowVersion[]> {
    return pageStatement(scope, query, 'versions').rows(this.db, pageValues(scope, query));
  }

  async findById(id: string): Promise<(ListingRow & RowVersion) | undefined> {
    const [row] = await BY_ID.rows<ListingRow & RowVersion>(this.db, { id });
    return row;
  }

  /** A listing's versions only: what a conditional GET is answered from. */
  async versionById(id: string): Promise<RowVersion | undefined> {
    const [row] = await VERSION_BY_ID.rows<RowVersion>(this.db, { id });
    return row;
  }

  /**
   * The seller's listings with these external ids (upserts, idempotent replays), in external_id
   * order.
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
  ): Promise<ListingRow[]> {
    if (externalIds.length === 0) return [];
    const sorted = [...new Set(externalIds)].sort();
    return BY_EXTERNAL_IDS.rows<ListingRow>(this.db, {
      externalIds: JSON.stringify(sorted),
      ...owner,
    });
  }

  /**
   * Inserts the items in one statement, in index order (their published_at rise with the index:
   * ordering keys that cannot clash, src/db/ordering-key.ts; the feed shows them newest first),
   * which also records their changes (`record`, src/listings/listing-changes.ts): atomic on its
   * own, so a create needs no transaction around it. An item whose external_id already exists is
   * skipped (ON CONFLICT DO NOTHING) and simply missing from the result: the caller upserts it.
   * Each row tells which background loops the recordings queued work for (QUEUED_LANES).
   */
  async insert(
    owner: { sellerId: string; appId: string | null; environment: Environment },
    items: NewListing[],
    record: ListingChanges,
  ): Promise<(ListingRow & { ord: number } & QueuedLanes)[]> {
    if (items.length === 0) return [];
    const itemsJson = JSON.stringify(items.map((item, ord) => ({ ord, ...item })));
    const change = { type: 'listing.created', environment: owner.environment } as const;
    return queryRows<ListingRow & { ord: number } & QueuedLanes>(
      this.db,
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
          ), ${changedRows(record, change, 'inserted')}
          select *, ${QUEUED_LANES} from inserted`,
    );
  }

  /**
   * Writes fields and status to one listing of `target`'s seller and environment, in one
   * statement that also records the change (`record` and QUEUED_LANES, as insert does), if the
   * state machine's rules allow it (writeRule). Returns the updated row, or undefined when
   * nothing was written: no such listing of this owner, or a rule refused (the caller reads the
   * row to say which).
   *
   * UPDATE evaluates its conditions on the row's latest committed version (it waits for a
   * concurrent writer's commit and checks again), so no SELECT ... FOR UPDATE round trip comes
   * first.
   *
   * The row is found by listings_pkey alone: seller and environment are checked through
   * `unindexed` (src/db/unique-lookups.ts), so no seller index can be chosen instead.
   */
  async update(
    target: ListingTarget,
    changes: ListingWrite,
    event: ListingEventType,
    record: ListingChanges,
  ): Promise<(ListingRow & QueuedLanes) | undefined> {
    const change = { type: event, environment: target.environment };
    const [row] = await queryRows<ListingRow & QueuedLanes>(
      this.db,
      sql`with upd as (
            update listings l set ${sql.join(setClauses(changes), sql`, `)}
            where l.id = ${target.id} and ${unindexed('l.seller_id')} = ${target.sellerId}
              and ${unindexed('l.environment')} = ${target.environment}
              and ${writeRule(changes)}
            returning l.*
          ), updated as (
            select 0 as ord, ${COLUMNS} from upd l join users u on u.id = l.seller_id
          ), ${changedRows(record, change, 'updated')}
          select *, ${QUEUED_LANES} from updated`,
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
 * `ord`) and the recordings' CTEs that read it (src/listings/listing-changes.ts).
 */
function changedRows(
  record: ListingChanges,
  change: { type: ListingEventType; environment: Environment },
  source: string,
): SQL {
  return record.ctes(
    change,
    {
      ord: sql`r.ord`,
      data: sql`json_build_object('listing', ${OWNER_VIEW_JSON})`,
      listing_id: sql`r.id`,
      seller_id: sql`r.seller_id`,
      app_id: sql`r.app_id`,
    },
    sql`${sql.identifier(source)} r`,
  );
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
 * The state machine's rules (state-machine.ts: states.update, states.archive) as the UPDATE's
 * condition on the row it writes: the listing is not archived (terminal), and if it is active
 * after the write it has a photo (what the write sets is known here, what it leaves comes from
 * the row). test/listings/write-rule.test.ts checks it against the state machine for every
 * status, photo and write.
 */
export function writeRule(changes: ListingWrite): SQL {
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
  return sql`l.status <> 'archived' and (not ${active} or ${cover} or ${images})`;
}
