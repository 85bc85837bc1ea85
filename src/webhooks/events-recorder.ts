/**
 * Records events in the outbox. As the listing changes' subscriber it runs inside the
 * listing's transaction (src/listings/listing-changes.ts), so an event exists if and only if
 * its change committed: nothing is lost when the process dies right after the response, and
 * nothing is announced for a change that rolled back. Delivery happens later, in the worker.
 */
import type { Db } from '../db/client.ts';
import type { SQL } from 'drizzle-orm';
import type { ListingChange, StatementChange } from '../listings/listing-changes.ts';
import {
  recordEventsInStatement,
  type EventsRepository,
  type NewEvent,
  type RecordedEvent,
} from './events-repository.ts';

export const PING_MESSAGE = 'Test delivery from the Marketplace dashboard';

export class EventsRecorder {
  private readonly listeners: (() => void)[] = [];

  constructor(private readonly events: EventsRepository) {}

  /**
   * Called after an event is recorded: inside the listing's transaction for listing changes
   * (not committed yet), after the commit for pings. The webhooks plugin uses it as a hint for
   * the worker to look soon; the worker's polling is what guarantees delivery.
   */
  onRecorded(listener: () => void): void {
    this.listeners.push(listener);
  }

  /**
   * The listing changes' subscriber. Changes made without an app's credential have nobody to
   * notify.
   */
  async recordListingChange(tx: Db, change: ListingChange): Promise<void> {
    await this.recordListingChanges(tx, [change]);
  }

  /** The changes of one write (a batch's items, in order): one statement per environment. */
  async recordListingChanges(tx: Db, changes: ListingChange[]): Promise<void> {
    const byEnvironment = new Map<ListingChange['environment'], NewEvent[]>();
    for (const change of changes) {
      if (change.appId === null) continue;
      const events = byEnvironment.get(change.environment) ?? [];
      events.push({
        appId: change.appId,
        environment: change.environment,
        type: change.type,
        data: { listing: change.listing },
        listingId: change.listing.id,
        sellerId: change.listing.seller.id,
      });
      byEnvironment.set(change.environment, events);
    }
    if (byEnvironment.size === 0) return;
    for (const events of byEnvironment.values()) await this.events.recordMany(events, tx);
    this.hint();
  }

  /**
   * The same, within the statement that makes the changes (ListingChanges.inStatement): the
   * events commit with the listings because they are one statement; each goes to its listing's
   * app (rows without one are skipped in the statement). The hint goes out now, as it does from
   * inside a transaction; the webhooks plugin acts on it once the response is sent.
   */
  recordListingChangesInStatement(change: StatementChange, source: string): SQL {
    this.hint();
    return recordEventsInStatement({ environment: change.environment, type: change.type }, source);
  }

  /** A ping for one endpoint (dashboard button, `webhook ping`), in its own transaction. */
  async recordPing(endpoint: {
    id: string;
    appId: string;
    environment: NewEvent['environment'];
  }): Promise<RecordedEvent> {
    const recorded = await this.events.transaction((tx) =>
      this.events.record(
        {
          appId: endpoint.appId,
          environment: endpoint.environment,
          type: 'ping',
          data: { message: PING_MESSAGE },
          endpointId: endpoint.id,
        },
        tx,
      ),
    );
    this.hint();
    return recorded;
  }

  /**
   * A test event (test-events.ts) of an app's sandbox, to every endpoint that enabled its type,
   * in its own transaction.
   */
  async recordTest(appId: string, type: NewEvent['type'], data: unknown): Promise<RecordedEvent> {
    const recorded = await this.events.transaction((tx) =>
      this.events.record({ appId, environment: 'sandbox', type, data }, tx),
    );
    this.hint();
    return recorded;
  }

  /** Tells the listeners that something may be due (also after a redelivery). */
  hint(): void {
    for (const listener of this.listeners) listener();
  }
}
