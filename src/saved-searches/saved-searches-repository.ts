/**
 * saved_searches and their keys (src/db/schema.ts). Raw SQL: the keys are computed by
 * PostgreSQL itself (websearch_to_tsquery, md5 of lower()), exactly as listings.match makes
 * the tokens they are compared with (drizzle/0013), so no JavaScript casing or digest can
 * differ from the database's.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { isoColumn, queryRows, sqlArray } from '../db/rows.ts';
import type { Environment } from '../generated/schemas.ts';
import type { MatchFilters } from '../listings/search-filters.ts';

export interface SavedSearchRecord {
  id: string;
  app_id: string;
  environment: Environment;
  user_id: string;
  via_token: boolean;
  name: string;
  q: string | null;
  category: string | null;
  condition: string[] | null;
  tag: string[] | null;
  brand: string | null;
  size: string | null;
  color: string | null;
  min_price_cents: number | null;
  max_price_cents: number | null;
  impact_mode: boolean | null;
  seller_username: string | null;
  created_at: string;
  last_matched_at: string | null;
}

export interface NewSavedSearch {
  id: string;
  appId: string;
  environment: Environment;
  userId: string;
  viaToken: boolean;
  name: string;
  filters: MatchFilters;
}

/** How many saved searches one environment may hold (saved-searches-service.ts). */
export interface SavedSearchCaps {
  /** An app's. */
  perApp: number;
  /** A developer's, across all the apps they own. */
  perOwner: number;
  /** Those made through one user's tokens, of one app. */
  perUser: number;
}

/** Whose saved searches a credential sees: its app's in its environment; a token's user's own. */
export interface SavedSearchOwner {
  appId: string;
  environment: Environment;
  /** An OAuth token: only the saved searches made through this user's tokens. */
  tokenUserId?: string | undefined;
}

const COLUMNS = sql.raw(
  `s.id, s.app_id, s.environment, s.user_id, s.via_token, s.name, s.q, s.category, s.condition,
   s.tag, s.brand, s.size, s.color, s.min_price_cents, s.max_price_cents, s.impact_mode,
   s.seller_username`,
);

/** No upper bound: saved_search_keys.max_price_cents of a search without max_price_cents. */
const MAX_INT = 2147483647;

const textArray = (items: readonly string[] | undefined): SQL =>
  items === undefined ? sql`null::text[]` : sqlArray(items, 'text');

/** The owner's condition on `saved_searches s`. */
function ownedBy(owner: SavedSearchOwner): SQL {
  const where = sql`s.app_id = ${owner.appId} and s.environment = ${owner.environment}`;
  return owner.tokenUserId === undefined
    ? where
    : sql`${where} and s.via_token and s.user_id = ${owner.tokenUserId}`;
}

export class SavedSearchesRepository {
  constructor(private readonly db: Db) {}

  /**
   * Saves one unless a cap is reached (answers which then): its app's in its environment, its
   * app's owner's across all their apps in that environment, or, for one made through a user's
   * token, that user's share of the app's. The owner's row is locked first, so two saves at once
   * (to any of the owner's apps) cannot both take the last place.
   */
  async insert(
    search: NewSavedSearch,
    keys: SQL[],
    caps: SavedSearchCaps,
  ): Promise<SavedSearchRecord | keyof SavedSearchCaps> {
    return this.db.transaction(async (tx) => {
      const [owner] = await queryRows<{ id: string }>(
        tx,
        sql`select u.id from users u
          where u.id = (select owner_id from apps where id = ${search.appId}) for no key update`,
      );
      const [count] = await queryRows<Record<keyof SavedSearchCaps, number>>(
        tx,
        sql`select count(*) filter (where s.app_id = ${search.appId})::int as "perApp",
            count(*)::int as "perOwner",
            count(*) filter (where s.app_id = ${search.appId} and s.via_token
              and s.user_id = ${search.userId})::int as "perUser"
          from apps a join saved_searches s on s.app_id = a.id
          where a.owner_id = ${owner!.id} and a.deleted_at is null and s.environment = ${search.environment}`,
      );
      const reached = (['perApp', 'perOwner', 'perUser'] as const).find(
        (cap) => (cap !== 'perUser' || search.viaToken) && count![cap] >= caps[cap],
      );
      if (reached) return reached;
      const f = search.filters;
      await queryRows(
        tx,
        sql`insert into saved_searches (id, app_id, environment, user_id, via_token, name, q,
            category, condition, tag, brand, size, color, min_price_cents, max_price_cents,
            impact_mode, seller_username)
          values (${search.id}, ${search.appId}, ${search.environment}, ${search.userId},
            ${search.viaToken}, ${search.name}, ${f.q ?? null}, ${f.category ?? null},
            ${textArray(f.condition)}, ${textArray(f.tag)}, ${f.brand ?? null}, ${f.size ?? null},
            ${f.color ?? null}, ${f.minPriceCents ?? null}, ${f.maxPriceCents ?? null},
            ${f.impactMode ?? null}, ${f.sellerUsername ?? null})`,
      );
      await queryRows(
        tx,
        sql`insert into saved_search_keys (token, saved_search_id, min_price_cents, max_price_cents)
          select distinct key, ${search.id}::uuid, ${f.minPriceCents ?? 0}::int,
            ${f.maxPriceCents ?? MAX_INT}::int
          from unnest(${sqlArray(keys, 'text')}) key`,
      );
      const [row] = await this.rows(tx, sql`s.id = ${search.id}`);
      return row!;
    });
  }

  /** The words websearch_to_tsquery makes of `q`, as PostgreSQL prints the tsquery. */
  async tsquery(q: string): Promise<string> {
    const [row] = await queryRows<{ text: string }>(
      this.db,
      sql`select websearch_to_tsquery('english', ${q})::text as text`,
    );
    return row!.text;
  }

  /** A seller's id by username, for a `seller` key; undefined when there is no such user. */
  async userIdByUsername(username: string): Promise<string | undefined> {
    const [row] = await queryRows<{ id: string }>(
      this.db,
      sql`select id from users where username = ${username}`,
    );
    return row?.id;
  }

  /** A page of the owner's saved searches, newest first (ids are UUIDv7), limit + 1 rows. */
  async page(
    owner: SavedSearchOwner,
    limit: number,
    before?: string,
  ): Promise<SavedSearchRecord[]> {
    const after = before === undefined ? sql`` : sql`and s.id < ${before}::uuid`;
    return this.rows(this.db, sql`${ownedBy(owner)} ${after}`, limit + 1);
  }

  async find(owner: SavedSearchOwner, id: string): Promise<SavedSearchRecord | undefined> {
    const [row] = await this.rows(this.db, sql`${ownedBy(owner)} and s.id = ${id}::uuid`);
    return row;
  }

  /** Whether one was deleted (its keys and matches go with it: ON DELETE CASCADE). */
  async delete(owner: SavedSearchOwner, id: string): Promise<boolean> {
    const rows = await queryRows(
      this.db,
      sql`delete from saved_searches s where ${ownedBy(owner)} and s.id = ${id}::uuid returning s.id`,
    );
    return rows.length > 0;
  }

  /**
   * A page of an app's saved searches for an operator (no caller: those made through keys and
   * tokens alike), in one environment or both, newest first, limit + 1 rows.
   */
  async pageOfApp(
    appId: string,
    environment: Environment | undefined,
    limit: number,
    before?: string,
  ): Promise<SavedSearchRecord[]> {
    const env = environment === undefined ? sql`` : sql`and s.environment = ${environment}`;
    const after = before === undefined ? sql`` : sql`and s.id < ${before}::uuid`;
    return this.rows(this.db, sql`s.app_id = ${appId} ${env} ${after}`, limit + 1);
  }

  /** One by id whatever its app (an operator's look before a delete, for the audit log). */
  async byId(id: string): Promise<SavedSearchRecord | undefined> {
    const [row] = await this.rows(this.db, sql`s.id = ${id}::uuid`);
    return row;
  }

  /** An operator's delete by id, in `appId` only when given; whether one was deleted. */
  async deleteById(id: string, appId?: string): Promise<boolean> {
    const inApp = appId === undefined ? sql`` : sql`and s.app_id = ${appId}`;
    const rows = await queryRows(
      this.db,
      sql`delete from saved_searches s where s.id = ${id}::uuid ${inApp} returning s.id`,
    );
    return rows.length > 0;
  }

  private rows(db: Db, where: SQL, limit = 1): Promise<SavedSearchRecord[]> {
    return queryRows<SavedSearchRecord>(
      db,
      sql`select ${COLUMNS}, ${isoColumn('s.created_at', 'created_at')},
          ${isoColumn('s.last_matched_at', 'last_matched_at')}
        from saved_searches s where ${where} order by s.id desc limit ${sql.raw(String(limit))}`,
    );
  }
}
