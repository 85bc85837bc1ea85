/**
 * The listing state machine (OpenAPI "Listings, money and photos"). Every write (create, upsert,
 * PATCH, DELETE, batch item) asks it what happens; nothing else decides a status.
 *
 *   (none)  --create draft|omitted--> draft      listing.created
 *   (none)  --create active + photo--> active    listing.created
 *   draft|active --PATCH status--> draft|active  listing.updated
 *   draft|active --upsert--> unchanged unless the body sets status   listing.updated
 *   any     --DELETE--> archived                 listing.archived (none when already archived)
 *   archived is terminal: PATCH or upsert -> 409 conflict; DELETE returns it again.
 */
import { ConflictError, ValidationError } from '../errors.ts';
import type { ListingStatus } from '../generated/schemas.ts';

export type ListingEventType = 'listing.created' | 'listing.updated' | 'listing.archived';

export interface Photos {
  coverImageUrl: string | null;
  imageUrls: readonly string[];
}

export interface Change {
  status: ListingStatus;
  event: ListingEventType;
}

/** A change, or nothing at all (DELETE of an archived listing: no second event). */
export type Transition = Change | { status: ListingStatus; event: null };

const hasPhoto = (photos: Photos) => photos.coverImageUrl !== null || photos.imageUrls.length > 0;

function requirePhotoIfActive(status: ListingStatus, photos: Photos): void {
  if (status === 'active' && !hasPhoto(photos)) {
    throw new ValidationError(
      'An active listing needs at least one photo: set cover_image_url or image_urls.',
      [{ path: '/cover_image_url', message: 'is required (or image_urls) when status is active' }],
    );
  }
}

/** POST /listings or a batch item that creates. */
export function create(requested: ListingStatus | undefined, photos: Photos): Change {
  const status = requested ?? 'draft';
  if (status === 'archived') throw ValidationError.field('/status', 'must be draft or active');
  requirePhotoIfActive(status, photos);
  return { status, event: 'listing.created' };
}

/**
 * PATCH, or an upsert of an existing external_id: `photos` is the listing as it would be after the
 * write.
 */
export function update(
  current: ListingStatus,
  requested: ListingStatus | undefined,
  photos: Photos,
): Change {
  if (current === 'archived') {
    throw new ConflictError('This listing is archived; archived listings cannot be changed.');
  }
  if (requested === 'archived')
    throw ValidationError.field('/status', 'cannot be archived here; use DELETE to archive');
  const status = requested ?? current;
  requirePhotoIfActive(status, photos);
  return { status, event: 'listing.updated' };
}

/** DELETE: soft archive; idempotent. */
export function archive(current: ListingStatus): Transition {
  return current === 'archived'
    ? { status: 'archived', event: null }
    : { status: 'archived', event: 'listing.archived' };
}
