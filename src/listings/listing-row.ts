/**
 * A listing as the statements read it (listings-repository.ts) and the view shows it
 * (listing-view.ts), apart from both so that neither imports the other's module for it.
 */
import type { Environment, ListingStatus } from '../generated/schemas.ts';

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
