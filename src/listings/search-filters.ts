/**
 * What a search keeps, and what "matches" means, once: each filter's condition on `listings l`,
 * used by GET /listings' statement (search-statement.ts, with its values as parameters) and by
 * the saved searches' matcher (src/saved-searches/matcher-worker.ts, with a saved search's
 * columns as the values), so the two cannot differ (test/saved-searches/same-as-search.test.ts).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { FeedScope } from '../access.ts';
import { sqlArray } from '../db/rows.ts';
import type { ListingStatus } from '../generated/schemas.ts';

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

export const TEXT_QUERY = (q: string | SQL) => sql`websearch_to_tsquery('english', ${q})`;

/** The scope's rows on `listings l`: the public feed, or one seller's in one environment. */
export function scopeConditions(scope: FeedScope): SQL[] {
  return scope.kind === 'public'
    ? [sql`l.environment = 'live'`, sql`l.status = 'active'`]
    : [sql`l.seller_id = ${scope.sellerId}`, sql`l.environment = ${scope.environment}`];
}

/** The filters a saved search can keep: GET /listings' search parameters but the owner view's. */
export type MatchFilters = Omit<SearchFilters, 'status' | 'updatedSince'>;

/**
 * What "matches" means, once (OpenAPI "Saved searches"): each filter's condition on `listings
 * l`, of its value as SQL, which is a search's parameter here and a saved search's column in
 * savedSearchMatches (src/saved-searches/matcher-worker.ts), so the two cannot differ.
 */
const MATCH_CONDITIONS: { [K in keyof Required<MatchFilters>]: (value: SQL) => SQL } = {
  q: (v) => sql`l.search @@ ${TEXT_QUERY(v)}`,
  category: (v) => sql`lower(l.category) = lower(${v})`,
  brand: (v) => sql`lower(l.brand) = lower(${v})`,
  size: (v) => sql`lower(l.size) = lower(${v})`,
  color: (v) => sql`lower(l.color) = lower(${v})`,
  condition: (v) => sql`l.condition = any(${v})`,
  tag: (v) => sql`l.tags @> ${v}`,
  minPriceCents: (v) => sql`l.price_cents >= ${v}`,
  maxPriceCents: (v) => sql`l.price_cents <= ${v}`,
  impactMode: (v) => sql`l.impact_mode = ${v}`,
  sellerUsername: (v) => sql`l.seller_id = (select id from users where username = ${v})`,
};

/** The columns of saved_searches (src/db/schema.ts) that hold each filter. */
const MATCH_COLUMNS: { [K in keyof Required<MatchFilters>]: string } = {
  q: 'q',
  category: 'category',
  brand: 'brand',
  size: 'size',
  color: 'color',
  condition: 'condition',
  tag: 'tag',
  minPriceCents: 'min_price_cents',
  maxPriceCents: 'max_price_cents',
  impactMode: 'impact_mode',
  sellerUsername: 'seller_username',
};

/** The conditions of the filters, on `listings l` (exact: what every returned row meets). */
export function filterConditions(filters: SearchFilters): SQL[] {
  const where: SQL[] = [];
  const f = filters;
  if (f.status !== undefined) where.push(sql`l.status = ${f.status}`);
  for (const name of Object.keys(MATCH_CONDITIONS) as (keyof MatchFilters)[]) {
    const value = f[name];
    if (value === undefined) continue;
    where.push(
      MATCH_CONDITIONS[name](
        Array.isArray(value) ? sqlArray(value as readonly string[], 'text') : sql`${value}`,
      ),
    );
  }
  if (f.updatedSince !== undefined) where.push(sql`l.updated_at >= ${f.updatedSince}::timestamptz`);
  return where;
}

/**
 * Whether `listings l` matches the saved search `s` (a row of saved_searches): the scope its
 * credential searches (the public live feed; a sandbox key's developer's sandbox listings),
 * active listings only, and every filter it has, each by MATCH_CONDITIONS as GET /listings
 * applies it.
 */
export function savedSearchMatches(s: string): SQL {
  const column = (name: string) => sql.raw(`${s}.${name}`);
  const seller = scopeConditions({
    kind: 'seller',
    sellerId: column('user_id') as unknown as string,
    environment: column('environment') as unknown as 'sandbox',
  });
  const filters = (Object.keys(MATCH_CONDITIONS) as (keyof MatchFilters)[]).map((name) => {
    const value = column(MATCH_COLUMNS[name]);
    return sql`(${value} is null or ${MATCH_CONDITIONS[name](value)})`;
  });
  return sql.join(
    [
      sql`l.status = 'active'`,
      sql`((${column('environment')} = 'live' and ${sql.join(scopeConditions({ kind: 'public' }), sql` and `)})
        or (${column('environment')} = 'sandbox' and ${sql.join(seller, sql` and `)}))`,
      ...filters,
    ],
    sql` and `,
  );
}
