/**
 * Records events in the outbox. As a recording of listing changes it is part of the statement
 * that makes the change (src/listings/listing-changes.ts), so an event exists if and only if
 * its change committed: nothing is lost when the process dies right after the response, and
 * nothing is announced for a change that rolled back. Delivery happens later, in the worker.
 */
import type { WakeUps } from '../lib/wake-ups.ts';
import type { ChangedListings, RecordingCtes } from '../listings/listing-changes.ts';
import {
  recordEventsInStatement,
  type EventsRepository,
  type NewEvent,
  type RecordedEvent,
} from '../events/events-repository.ts';

export const PING_MESSAGE = 'Test delivery from the Marketplace dashboard';

export class EventsRecorder {
  /**
   * A ping or a test event wakes the delivery worker once committed (src/lib/wake-ups.ts); a
   * listing change's recording, when its statement says it queued a delivery.
   */
  constructor(
    private readonly events: EventsRepository,
    private readonly wakeUps: WakeUps,
  ) {}

  /**
   * The listing changes' recording (src/listings/listing-changes.ts): the events commit with the
   * listings because they are written by the same statement; each goes to its listing's app
   * (rows without one are skipped in the statement). The worker looks once the write's request
   * is answered, if the statement queued a delivery (ListingWritesService wakes it).
   */
  recordListingChanges(changed: ChangedListings): RecordingCtes {
    return recordEventsInStatement(changed);
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
    this.wakeUps.now('deliveries');
    return recorded;
  }

  /**
   * A test event (test-events.ts) of an app's sandbox, to every endpoint that enabled its type
   * (or to the one endpoint given, as a ping), in its own transaction.
   */
  async recordTest(
    appId: string,
    type: NewEvent['type'],
    data: unknown,
    endpointId?: string,
  ): Promise<RecordedEvent> {
    const recorded = await this.events.transaction((tx) =>
      this.events.record(
        { appId, environment: 'sandbox', type, data, ...(endpointId ? { endpointId } : {}) },
        tx,
      ),
    );
    this.wakeUps.now('deliveries');
    return recorded;
  }
}
