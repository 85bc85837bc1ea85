/**
 * GET /api/v1/events: the calling app's events of the last 30 days in the credential's
 * environment (an OAuth token: only those about its user's listings), newest first, keyset-paged on
 * created_at (unique per environment at microsecond precision, so any page size yields every event
 * exactly once). An integrator whose endpoint was down catches up here, deduplicating on
 * `event_id`.
 */
import { ForbiddenError } from '../errors.ts';
import type { Event, EventType } from '../generated/schemas.ts';
import type { Caller } from '../access.ts';
import type { EventRow, EventsRepository } from './events-repository.ts';

/**
 * An event as listed: `id` and `event_id` are both the event id (a webhook body's `id` is its
 * delivery id).
 */
function eventView(row: EventRow): Event {
  return {
    id: row.id,
    event_id: row.id,
    type: row.type,
    created_at: row.created_at,
    data: JSON.parse(row.data),
  } as Event;
}

export class EventsService {
  constructor(private readonly events: EventsRepository) {}

  async list(
    caller: Caller,
    query: { limit: number; cursor?: string | undefined; type?: EventType | undefined },
  ): Promise<{ items: Event[]; nextCursor: string | null }> {
    if (!caller.appId)
      throw new ForbiddenError(
        'Events belong to an app: use an API key or an access token of the app.',
      );
    // An API key acts as the app's developer: all of the app's events. An OAuth token acts for one
    // user: only the events about that user's listings (never another user's drafts, no pings).
    const sellerId = caller.kind === 'oauth' ? (caller.userId ?? undefined) : undefined;
    if (caller.kind === 'oauth' && sellerId === undefined)
      throw new ForbiddenError('This token acts for no user.');
    const rows = await this.events.page(
      { appId: caller.appId, environment: caller.environment, sellerId, type: query.type },
      query.limit,
      query.cursor,
    );
    const page = rows.slice(0, query.limit);
    return {
      items: page.map(eventView),
      nextCursor: rows.length > query.limit ? page[page.length - 1]!.created_at : null,
    };
  }
}
