/**
 * GET /api/v1/events: the calling app's events of the last 30 days in the credential's
 * environment (an OAuth token: only those about its user's listings), newest first, keyset-paged on
 * created_at (unique per environment at microsecond precision, so any page size yields every event
 * exactly once). An integrator whose endpoint was down catches up here, deduplicating on
 * `event_id`.
 */
import { ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from '../errors.ts';
import type { Environment, Event, EventType } from '../generated/schemas.ts';
import { isTimestamp, TIMESTAMP_RANGE } from '../lib/timestamps.ts';
import { listedEventType, type Caller } from '../access.ts';
import type {
  AttemptRow,
  EventDeliveryRow,
  EventRow,
  EventsRepository,
} from './events-repository.ts';
import type { EventWaiters, WaitScope } from './event-waiters.ts';

/** An event with its deliveries, each with its attempts (the portal's Events pages, the CLI). */
export interface EventDetail {
  event: Event;
  environment: Environment;
  deliveries: (EventDeliveryRow & { attempts_made: Omit<AttemptRow, 'delivery_id'>[] })[];
}

export type { EventDeliveryRow };

const EVENT_ID = /^[0-9a-f]{32}$/;

/**
 * How soon a wait reads again while an event after its cursor is held back by a write still open
 * (EventsRepository.horizon): such a write usually ends in moments, and may record nothing to
 * notify. Doubled on each read that finds it still held back, up to the longest: a long
 * transaction on the database must not make every waiter read 40 times a second.
 */
const HELD_BACK_RETRY_MS = { first: 25, longest: 1000 };

/** A GET /api/v1/events query. With `wait`, the page is read forward (OpenAPI listEvents). */
export interface EventsQuery {
  limit: number;
  cursor?: string | undefined;
  type?: EventType | undefined;
  /** Seconds, 0-30: long polling. */
  wait?: number | undefined;
}

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
  constructor(
    private readonly events: EventsRepository,
    /** The requests waiting on `wait` in this process (src/events/event-waits-plugin.ts). */
    readonly waiters: EventWaiters,
  ) {}

  /**
   * The list, or with `wait` its forward read (wait()). `gone` tells that the client went away:
   * a wait then ends without answering. `stillValid` says whether the credential still works: a
   * wait that slept asks it before answering with data (a key or token revoked meanwhile: 401).
   */
  async list(
    caller: Caller,
    query: EventsQuery,
    gone?: AbortSignal,
    stillValid: () => Promise<boolean> = async () => true,
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
    // Ajv's date-time format reads the year 0000 and offsets PostgreSQL refuses
    // (lib/timestamps.ts).
    if (query.cursor !== undefined && !isTimestamp(query.cursor))
      throw ValidationError.field('/query/cursor', TIMESTAMP_RANGE);
    // `searches` without `read`: only listing.matched (src/access.ts).
    query = { ...query, type: listedEventType(caller, query.type) };
    const scope = { appId: caller.appId, environment: caller.environment, sellerId };
    if (query.wait === undefined) return this.page(scope, query);
    return this.wait(
      caller.credentialId ?? caller.appId,
      { ...scope, ownerId: caller.appOwnerId ?? caller.appId },
      { ...query, wait: query.wait },
      gone,
      stillValid,
    );
  }

  /**
   * Long polling: the events after the cursor (from the horizon, "now", without one), oldest
   * first, as soon as there is one, else an empty page with the same cursor after `wait` seconds
   * (at once when closing). Waits in memory, on a place taken from the waiters (refused beyond
   * their caps: credential, user, app and environment, developer account, process), woken by
   * the database's notifications of events it may see (its app's; a token's, only its
   * seller's); the cursor never passes an event that could still commit (horizon).
   */
  private async wait(
    credential: string,
    scope: WaitScope & { environment: Environment },
    query: EventsQuery & { wait: number },
    gone: AbortSignal | undefined,
    stillValid: () => Promise<boolean>,
  ): Promise<{ items: Event[]; nextCursor: string }> {
    const deadline = Date.now() + query.wait * 1000;
    // Woken by the notifications of events it may see: its app's, and a token's seller's.
    const waiter = query.wait > 0 ? this.waiters.enter(credential, scope) : undefined;
    const stop = () => waiter?.leave();
    gone?.addEventListener('abort', stop);
    try {
      let cursor = query.cursor;
      let retry = HELD_BACK_RETRY_MS.first;
      let slept = false;
      for (;;) {
        if (waiter) waiter.notified = false;
        const horizon = await this.events.horizon();
        cursor ??= horizon;
        const { rows, heldBack } = await this.events.pageAfter(
          { ...scope, type: query.type },
          query.limit,
          cursor,
          horizon,
        );
        const page = rows.slice(0, query.limit);
        if (page.length > 0) {
          // The credential was checked when the request arrived; after a sleep, again.
          if (slept && !(await stillValid()))
            throw new UnauthorizedError('The credential is invalid, expired or revoked.', {
              rejectedCredential: true,
            });
          return { items: page.map(eventView), nextCursor: page[page.length - 1]!.created_at };
        }
        const left = deadline - Date.now();
        if (!waiter || left <= 0 || this.waiters.closing || gone?.aborted)
          return { items: [], nextCursor: cursor };
        slept = true;
        if (!heldBack) {
          retry = HELD_BACK_RETRY_MS.first;
          await waiter.sleep(left);
        } else {
          await waiter.sleep(Math.min(retry, left));
          retry = Math.min(retry * 2, HELD_BACK_RETRY_MS.longest);
        }
      }
    } finally {
      gone?.removeEventListener('abort', stop);
      waiter?.leave();
    }
  }

  /**
   * An app's events in one environment, as an API key of the app lists them (the portal's Events
   * page and `admin app events`), with each event's deliveries.
   */
  async forApp(
    appId: string,
    environment: string,
    query: { limit: number; cursor?: string | undefined },
  ): Promise<{ items: Event[]; nextCursor: string | null; deliveries: EventDeliveryRow[] }> {
    if (environment !== 'sandbox' && environment !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    if (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > 100)
      throw ValidationError.say('/limit', 'The limit is a whole number from 1 to 100.');
    if (query.cursor !== undefined && !isTimestamp(query.cursor))
      throw ValidationError.say(
        '/cursor',
        'That page link is broken; start again from the newest events.',
      );
    const page = await this.page({ appId, environment }, query);
    const deliveries = await this.events.deliveriesOf(page.items);
    return { ...page, deliveries };
  }

  /** One event of the app with its deliveries and their attempts; another app's is not found. */
  async detail(eventId: string, scope: { appId?: string } = {}): Promise<EventDetail> {
    const row = EVENT_ID.test(eventId) ? await this.events.findById(eventId) : undefined;
    if (!row || (scope.appId !== undefined && row.app_id !== scope.appId))
      throw new NotFoundError(`No event with id ${eventId}.`);
    const deliveries = await this.events.deliveriesOf([row]);
    const attempts = await this.events.attemptsOf(
      deliveries.map((d) => d.id),
      row.created_at,
    );
    return {
      event: eventView(row),
      environment: row.environment,
      deliveries: deliveries.map((d) => ({
        ...d,
        attempts_made: attempts
          .filter((a) => a.delivery_id === d.id)
          .map(({ delivery_id: _, ...attempt }) => attempt),
      })),
    };
  }

  private async page(
    scope: { appId: string; environment: Environment; sellerId?: string | undefined },
    query: EventsQuery,
  ): Promise<{ items: Event[]; nextCursor: string | null }> {
    const rows = await this.events.page({ ...scope, type: query.type }, query.limit, query.cursor);
    const page = rows.slice(0, query.limit);
    return {
      items: page.map(eventView),
      nextCursor: rows.length > query.limit ? page[page.length - 1]!.created_at : null,
    };
  }
}
