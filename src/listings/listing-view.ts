/**
 * A listing row as the API shows it: the listing resource, in the owner's view or the public
 * one, and the facts about a row that its visibility depends on (src/access.ts decides).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Listing } from '../generated/schemas.ts';
import type { ListingAccess } from '../access.ts';
import type { ListingRow } from './listing-row.ts';

type Column = keyof ListingRow;
type OwnerOnly = 'external_id' | 'api_environment';
/** Each field of the resource from a column of the row; `seller` from four. */
type Fields<T> = {
  [K in keyof T]-?: K extends 'seller' ? { [S in keyof Listing['seller']]-?: Column } : Column;
};

/**
 * The one field list of the listing resource, in the order the API shows them: what
 * listingView builds in TypeScript and OWNER_VIEW_JSON in SQL (the events a statement records,
 * src/listings/listing-changes.ts), so an event's listing is the API's answer, field for field
 * and in the same order (test/webhooks/in-statement.test.ts compares the two, text and all).
 */
const PUBLIC_FIELDS = {
  id: 'id',
  title: 'title',
  description: 'description',
  category: 'category',
  condition: 'condition',
  price_cents: 'price_cents',
  currency: 'currency',
  status: 'status',
  impact_mode: 'impact_mode',
  cover_image_url: 'cover_image_url',
  like_count: 'like_count',
  published_at: 'published_at',
  seller: {
    id: 'seller_id',
    username: 'seller_username',
    display_name: 'seller_display_name',
    avatar_url: 'seller_avatar_url',
  },
  brand: 'brand',
  size: 'size',
  color: 'color',
  tags: 'tags',
  image_urls: 'image_urls',
  created_at: 'created_at',
  updated_at: 'updated_at',
} as const satisfies Fields<Omit<Listing, OwnerOnly>>;

/** Only for the owner (OpenAPI "Listings, money and photos"), after the others. */
const OWNER_FIELDS = {
  external_id: 'external_id',
  api_environment: 'environment',
} as const satisfies Fields<Pick<Listing, OwnerOnly>>;

type Entry = [field: string, column: Column];
const entries = (fields: Record<string, Column>): Entry[] => Object.entries(fields);
const { seller: SELLER_FIELDS, ...rest } = PUBLIC_FIELDS;
const SELLER = entries(SELLER_FIELDS);
const SELLER_AT = Object.keys(PUBLIC_FIELDS).indexOf('seller');
const BEFORE_SELLER = entries(rest).slice(0, SELLER_AT);
const AFTER_SELLER = entries(rest).slice(SELLER_AT);
const OWNER = entries(OWNER_FIELDS);

const read = ([field, column]: Entry) => `${JSON.stringify(field)}: row[${JSON.stringify(column)}]`;

/**
 * listingView compiled from the field list into one object literal, as written by hand (the
 * way Fastify compiles its serializers): a loop over the list assigning keys one by one made
 * every view two to three times slower, and a feed page builds up to 100. The list is this
 * module's constants, never input.
 */
const compiledView = new Function(
  'row',
  'owner',
  `const listing = { ${[
    ...BEFORE_SELLER.map(read),
    `"seller": { ${SELLER.map(read).join(', ')} }`,
    ...AFTER_SELLER.map(read),
  ].join(', ')} };
  if (owner) { ${OWNER.map(([field, column]) => `listing[${JSON.stringify(field)}] = row[${JSON.stringify(column)}];`).join(' ')} }
  return listing;`,
) as (row: ListingRow, owner: boolean) => Listing;

/**
 * The API's listing resource; external_id and api_environment only for the owner (OpenAPI
 * "Listings, money and photos").
 */
export function listingView(row: ListingRow, owner: boolean): Listing {
  return compiledView(row, owner);
}

const jsonPairs = (fields: Entry[]) => fields.map(([field, column]) => `'${field}', r.${column}`);

/**
 * listingView(row, true) in SQL: the owner's view, as json, of a row `r` named as ListingRow.
 */
export const OWNER_VIEW_JSON: SQL = sql.raw(
  `json_build_object(${[
    ...jsonPairs(BEFORE_SELLER),
    `'seller', json_build_object(${jsonPairs(SELLER).join(', ')})`,
    ...jsonPairs(AFTER_SELLER),
    ...jsonPairs(OWNER),
  ].join(', ')})`,
);

/** The columns of a row that its visibility and view depend on. */
export type RowAccess = Pick<ListingRow, 'seller_id' | 'environment' | 'status'>;

export function access(row: RowAccess): ListingAccess {
  return { sellerId: row.seller_id, environment: row.environment, status: row.status };
}
