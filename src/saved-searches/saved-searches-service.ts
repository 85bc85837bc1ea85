/**
 * Saved searches (OpenAPI "Saved searches"): saved, listed, read and deleted by an app's
 * credentials; matched against listing writes by matcher-worker.ts. Who may see which is
 * decided here, from the caller (src/access.ts's Caller), once.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Caller } from '../access.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { Environment, SavedSearch, SavedSearchCreate } from '../generated/schemas.ts';
import { uuidV7 } from '../lib/uuid-v7.ts';
import { checkStorableText } from '../listings/listing-input.ts';
import { checkSearchValues } from '../listings/listings-read-service.ts';
import type { MatchFilters } from '../listings/search-filters.ts';
import { requiredWords } from './match-keys.ts';
import type {
  SavedSearchCaps,
  SavedSearchOwner,
  SavedSearchRecord,
  SavedSearchesRepository,
} from './saved-searches-repository.ts';

/**
 * Saved searches per environment (OpenAPI "Saved searches", "Budgets"): an app's; its owner's
 * across all their apps (so more apps do not mean more searches); and those made through one
 * end user's tokens, a share of the app's (so one user cannot take every other user's place).
 */
export const SAVED_SEARCH_CAPS: SavedSearchCaps = { perApp: 500, perOwner: 1000, perUser: 50 };

const capMessages: Record<keyof SavedSearchCaps, (env: Environment) => string> = {
  perApp: (env) =>
    `This app has ${SAVED_SEARCH_CAPS.perApp} saved searches in ${env}: delete one first.`,
  perOwner: (env) =>
    `This app's developer has ${SAVED_SEARCH_CAPS.perOwner} saved searches in ${env} across ` +
    'their apps: delete one first.',
  perUser: (env) =>
    `This user has ${SAVED_SEARCH_CAPS.perUser} saved searches of this app in ${env}: delete ` +
    'one first.',
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A token of listings.match (drizzle/0013) of a filter compared without case, as SQL. */
const digestKey = (name: string, value: string): SQL => sql`${`${name}:`} || md5(lower(${value}))`;

/** A saved search as an operator sees it: the API's view, its environment and its maker. */
export type SavedSearchDetail = SavedSearch & {
  environment: Environment;
  /** Made through a user's OAuth token (else through one of the app's API keys). */
  via_token: boolean;
};

/**
 * The one not-found answer: a credential's request is told "this id" (the path holds it); an
 * operator's look by id (CLI, portal) is told the id it asked for.
 */
function noSuchSavedSearch(id?: string): NotFoundError {
  return new NotFoundError(
    id === undefined ? 'No saved search with this id.' : `No saved search with id ${id}.`,
  );
}

export class SavedSearchesService {
  constructor(private readonly repository: SavedSearchesRepository) {}

  async create(caller: Caller, body: SavedSearchCreate): Promise<SavedSearch> {
    const owner = ownerOf(caller);
    checkStorableText(body);
    checkSearchValues(body, '');
    const filters: MatchFilters = {
      q: body.q,
      category: body.category,
      condition: body.condition && [...body.condition].sort(),
      tag: body.tag && [...new Set(body.tag)].sort(),
      brand: body.brand,
      size: body.size,
      color: body.color,
      minPriceCents: body.min_price_cents,
      maxPriceCents: body.max_price_cents,
      impactMode: body.impact_mode,
      sellerUsername: body.seller,
    };
    if (Object.values(filters).every((value) => value === undefined))
      throw ValidationError.field('/q', 'or a filter is needed: a saved search matches something');
    const keys = await this.keysOf(owner, caller.userId!, filters);
    const saved = await this.repository.insert(
      {
        id: uuidV7(Date.now()),
        appId: owner.appId,
        environment: owner.environment,
        userId: caller.userId!,
        viaToken: caller.kind === 'oauth',
        name: body.name,
        filters,
      },
      keys,
      SAVED_SEARCH_CAPS,
    );
    if (typeof saved === 'string') throw new ConflictError(capMessages[saved](owner.environment));
    return savedSearchView(saved);
  }

  async list(
    caller: Caller,
    query: { limit: number; cursor?: string | undefined },
  ): Promise<{ items: SavedSearch[]; nextCursor: string | null }> {
    if (query.cursor !== undefined && !UUID.test(query.cursor))
      throw ValidationError.field('/query/cursor', 'must be a next_cursor as it was given');
    const rows = await this.repository.page(ownerOf(caller), query.limit, query.cursor);
    const items = rows.slice(0, query.limit).map(savedSearchView);
    const nextCursor = rows.length > query.limit ? items[items.length - 1]!.id : null;
    return { items, nextCursor };
  }

  async get(caller: Caller, id: string): Promise<SavedSearch> {
    const row = await this.repository.find(ownerOf(caller), id);
    if (!row) throw noSuchSavedSearch();
    return savedSearchView(row);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    if (!(await this.repository.delete(ownerOf(caller), id))) throw noSuchSavedSearch();
  }

  /**
   * An app's saved searches as its operator and its developer see them (admin CLI, portal): no
   * caller, so those made through keys and through users' tokens alike, in one environment or
   * both, newest first; each says its environment and whether a token made it.
   */
  async forApp(
    appId: string,
    query: { env?: string | undefined; limit: number; cursor?: string | undefined },
  ): Promise<{ items: SavedSearchDetail[]; nextCursor: string | null }> {
    const { env } = query;
    if (env !== undefined && env !== 'sandbox' && env !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    if (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > 100)
      throw ValidationError.say('/limit', 'The limit is a whole number from 1 to 100.');
    if (query.cursor !== undefined && !UUID.test(query.cursor))
      throw ValidationError.say(
        '/cursor',
        'That page link is broken; start again from the newest.',
      );
    const rows = await this.repository.pageOfApp(appId, env, query.limit, query.cursor);
    const items = rows.slice(0, query.limit).map((row) => ({
      ...savedSearchView(row),
      environment: row.environment,
      via_token: row.via_token,
    }));
    const nextCursor = rows.length > query.limit ? items[items.length - 1]!.id : null;
    return { items, nextCursor };
  }

  /** Where one is (its app and environment), by id without a caller: an operator's look. */
  async placeOf(id: string): Promise<{ appId: string; environment: Environment }> {
    const found = UUID.test(id) ? await this.repository.byId(id) : undefined;
    if (found === undefined) throw noSuchSavedSearch(id);
    return { appId: found.app_id, environment: found.environment };
  }

  /**
   * Deletes one by id without a caller (an operator; the portal passes its app, so another
   * app's is not found), as DELETE /api/v1/saved_searches/{id} does for a credential.
   */
  async remove(id: string, scope: { appId?: string } = {}): Promise<{ id: string; deleted: true }> {
    if (!UUID.test(id) || !(await this.repository.deleteById(id, scope.appId)))
      throw noSuchSavedSearch(id);
    return { id, deleted: true };
  }

  /**
   * The keys (match-keys.ts) of a saved search: a sandbox one's developer's sandbox (every
   * listing it can match is theirs); a live one's most selective term it has, in this order:
   * the seller, the brand, a tag, a word every match has (when it is one word), the category,
   * the color, the size, or any of the words one of which every match has. Condition, prices
   * and impact mode are too common to recognise listings by: a search of only those is refused,
   * in sandbox too, so that a search saved in sandbox can be saved in live.
   */
  private async keysOf(owner: SavedSearchOwner, userId: string, f: MatchFilters): Promise<SQL[]> {
    const tsquery = f.q === undefined ? undefined : await this.repository.tsquery(f.q);
    // GET /listings answers such a q with nothing: a saved search of it would never match.
    if (tsquery === '')
      throw ValidationError.field('/q', 'has only words too common to search for');
    const words = tsquery === undefined ? null : requiredWords(tsquery);
    let sellerKey: SQL | null = null;
    if (f.sellerUsername !== undefined) {
      const sellerId = await this.repository.userIdByUsername(f.sellerUsername);
      if (sellerId === undefined) throw ValidationError.field('/seller', 'is no seller');
      sellerKey = sql`${`seller:live:${sellerId}`}`;
    }
    const wordKeys = (words ?? []).map((word) => sql`${word}`);
    const choices: (SQL[] | null)[] = [
      sellerKey && [sellerKey],
      f.brand === undefined ? null : [digestKey('brand', f.brand)],
      f.tag === undefined ? null : [sql`${'tag:'} || md5(${f.tag[0]!})`],
      wordKeys.length === 1 ? wordKeys : null,
      f.category === undefined ? null : [digestKey('category', f.category)],
      f.color === undefined ? null : [digestKey('color', f.color)],
      f.size === undefined ? null : [digestKey('size', f.size)],
      wordKeys.length > 1 ? wordKeys : null,
    ];
    const keys = choices.find((choice) => choice !== null);
    if (!keys)
      throw ValidationError.field(
        '/q',
        'needs a word every match contains (not only -excluded words), or add category, brand, size, color, tag or seller: condition, prices and impact_mode only narrow',
      );
    // The same rule in both environments; a sandbox search's listings are all its developer's.
    return owner.environment === 'sandbox' ? [sql`${`seller:sandbox:${userId}`}`] : keys;
  }
}

/** A credential's saved searches: its app's, in its environment; a token's, its user's too. */
function ownerOf(caller: Caller): SavedSearchOwner {
  // The operations' security (the auth plugin) lets only an app's key or token through.
  return {
    appId: caller.appId!,
    environment: caller.environment,
    tokenUserId: caller.kind === 'oauth' ? caller.userId! : undefined,
  };
}

function savedSearchView(row: SavedSearchRecord): SavedSearch {
  return {
    id: row.id,
    name: row.name,
    q: row.q,
    category: row.category,
    condition: row.condition as SavedSearch['condition'],
    tag: row.tag,
    brand: row.brand,
    size: row.size,
    color: row.color,
    min_price_cents: row.min_price_cents,
    max_price_cents: row.max_price_cents,
    impact_mode: row.impact_mode,
    seller: row.seller_username,
    created_at: row.created_at,
    last_matched_at: row.last_matched_at,
  };
}
