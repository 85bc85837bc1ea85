/**
 * Saved searches (OpenAPI "Saved searches"): saved, listed, read and deleted by an app's
 * credentials; matched against listing writes by matcher.ts. Who may see which is decided here,
 * from the caller (src/access.ts's Caller), once.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Caller } from '../access.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { SavedSearch, SavedSearchCreate } from '../generated/schemas.ts';
import { uuidV7 } from '../lib/uuid-v7.ts';
import { checkSearchValues } from '../listings/listings-read-service.ts';
import type { MatchFilters } from '../listings/search-statement.ts';
import { requiredWords } from './match-keys.ts';
import type {
  SavedSearchOwner,
  SavedSearchRecord,
  SavedSearchesRepository,
} from './saved-searches-repository.ts';

/** Saved searches an app may have per environment (OpenAPI "Saved searches"). */
export const SAVED_SEARCH_CAP = 500;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A token of listings.match (drizzle/0013) of a filter compared without case, as SQL. */
const digestKey = (name: string, value: string): SQL => sql`${`${name}:`} || md5(lower(${value}))`;

export class SavedSearchesService {
  constructor(private readonly repository: SavedSearchesRepository) {}

  async create(caller: Caller, body: SavedSearchCreate): Promise<SavedSearch> {
    const owner = ownerOf(caller);
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
      SAVED_SEARCH_CAP,
    );
    if (!saved)
      throw new ConflictError(
        `This app has ${SAVED_SEARCH_CAP} saved searches in ${owner.environment}: delete one first.`,
      );
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
    if (!row) throw new NotFoundError('No saved search with this id.');
    return savedSearchView(row);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    if (!(await this.repository.delete(ownerOf(caller), id)))
      throw new NotFoundError('No saved search with this id.');
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
