/**
 * Test events on demand (POST /api/v1/events/test, `marketplace-listings-sdk trigger`, the
 * portal's "Send test event"): a sandbox event of a listing type with a realistic payload about
 * a sample listing that exists nowhere, marked `data.test: true` (the document's
 * ListingEventData and ListingMatchedEventData say so). Recorded and delivered as a real event.
 */
import { randomUUID } from 'node:crypto';
import type { EventType } from '../generated/schemas.ts';

/** The types a test event may have: every listing event (a ping has its own button). */
export const TEST_EVENT_TYPES = [
  'listing.created',
  'listing.updated',
  'listing.archived',
  'listing.matched',
] as const satisfies readonly EventType[];
export type TestEventType = (typeof TEST_EVENT_TYPES)[number];

/** The event's data: the listing as that type's real event carries it, and `test: true`. */
export function testEventData(type: TestEventType, now = new Date()): Record<string, unknown> {
  const at = now.toISOString().replace(/Z$/, '000Z');
  const created = new Date(now.getTime() - 3_600_000).toISOString().replace(/Z$/, '000Z');
  const listing = {
    id: randomUUID(),
    title: 'Test listing: vintage denim jacket',
    description: 'A sample listing of a test event; no such listing exists.',
    category: 'Jackets',
    condition: 'good',
    price_cents: 4500,
    currency: 'usd',
    status: type === 'listing.archived' ? 'archived' : 'active',
    impact_mode: false,
    cover_image_url: null,
    like_count: 0,
    published_at: created,
    seller: {
      id: '00000000-0000-4000-8000-000000000000',
      username: 'test_seller',
      display_name: 'Test seller',
      avatar_url: null,
    },
    brand: "Levi's",
    size: 'M',
    color: 'blue',
    tags: ['denim', 'test'],
    image_urls: [],
    created_at: type === 'listing.created' ? at : created,
    updated_at: at,
  };
  if (type === 'listing.matched')
    // The public view a saved search matches (Listing, without the owner's fields).
    return { test: true, saved_search_id: randomUUID(), listing };
  return { test: true, listing: { ...listing, external_id: null, api_environment: 'sandbox' } };
}
