/**
 * The one place where listing changes are announced. Every create, update and archive
 * calls announce() inside the transaction that made the change, so a listener that records
 * something (the webhooks' event outbox) commits or rolls back together with the listing.
 */
import type { Db } from '../db/client.ts';
import type { Environment, Listing } from '../generated/schemas.ts';
import type { ListingEventType } from './state-machine.ts';

export interface ListingChange {
  type: ListingEventType;
  /** The owner's view of the listing after the change (with external_id and api_environment). */
  listing: Listing;
  environment: Environment;
  /** The app whose credential made the change; its endpoints are notified. */
  appId: string | null;
}

export type ListingChangeListener = (tx: Db, change: ListingChange) => Promise<void>;
/** Receives the changes of one write together, in order (a batch's items in index order). */
export type ListingChangesListener = (tx: Db, changes: ListingChange[]) => Promise<void>;

export class ListingChanges {
  private readonly listeners: ListingChangesListener[] = [];

  /** Called once per change. */
  subscribe(listener: ListingChangeListener): void {
    this.listeners.push(async (tx, changes) => {
      for (const change of changes) await listener(tx, change);
    });
  }

  /** Called once per write with all of its changes (the outbox records them in one statement). */
  subscribeAll(listener: ListingChangesListener): void {
    this.listeners.push(listener);
  }

  announce(tx: Db, change: ListingChange): Promise<void> {
    return this.announceAll(tx, [change]);
  }

  async announceAll(tx: Db, changes: ListingChange[]): Promise<void> {
    if (changes.length === 0) return;
    for (const listener of this.listeners) await listener(tx, changes);
  }
}
