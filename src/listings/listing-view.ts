/**
 * A listing row as the API shows it: the listing resource, in the owner's view or the public
 * one, and the facts about a row that its visibility depends on (src/access.ts decides).
 */
import type { Listing } from '../generated/schemas.ts';
import type { ListingAccess } from '../access.ts';
import type { ListingRow } from './listings-repository.ts';

/**
 * The API's listing resource; external_id and api_environment only for the owner (OpenAPI
 * "Listings, money and photos").
 */
export function listingView(row: ListingRow, owner: boolean): Listing {
  const listing: Listing = {
    id: row.id,
    title: row.title,
    description: row.description,
    category: row.category,
    condition: row.condition as Listing['condition'],
    price_cents: row.price_cents,
    currency: row.currency,
    status: row.status,
    impact_mode: row.impact_mode,
    cover_image_url: row.cover_image_url,
    like_count: row.like_count,
    published_at: row.published_at,
    seller: {
      id: row.seller_id,
      username: row.seller_username,
      display_name: row.seller_display_name,
      avatar_url: row.seller_avatar_url,
    },
    brand: row.brand,
    size: row.size,
    color: row.color,
    tags: row.tags,
    image_urls: row.image_urls,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
  if (owner) {
    listing.external_id = row.external_id;
    listing.api_environment = row.environment;
  }
  return listing;
}

/** The columns of a row that its visibility and view depend on. */
export type RowAccess = Pick<ListingRow, 'seller_id' | 'environment' | 'status'>;

export function access(row: RowAccess): ListingAccess {
  return { sellerId: row.seller_id, environment: row.environment, status: row.status };
}
