/**
 * The one place where listing changes are announced. Every create, update and archive
 * calls announce() inside the transaction that made the change, so a listener that records
 * something (the webhooks' event outbox) commits or rolls back together with the listing.
 *
 * A listener may also give the same recording as SQL to run inside the very statement that
 * makes the change (inStatement): then a create needs no transaction around it, one round
 * trip instead of BEGIN, insert, record, COMMIT (`npm run bench`, docs/performance.md).
 */
import type { SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import type { Environment, Listing } from '../generated/schemas.ts';
import type { ListingEventType } from './state-machine.ts';

export interface ListingChange {
  type: ListingEventType;
  /** The owner's view of the listing after the change (with external_id and api_environment). */
  listing: Listing;
  environment: Environment;
  /**
   * The app whose credential created the listing, whichever credential made this change: its
   * endpoints are notified (null: nobody to notify).
   */
  appId: string | null;
}

/**
 * What a statement that changes listings knows before it runs: the event and the environment
 * (the listings, and the app each one's event goes to, come from its rows).
 */
export type StatementChange = Pick<ListingChange, 'type' | 'environment'>;

export type ListingChangeListener = (tx: Db, change: ListingChange) => Promise<void>;
/** Receives the changes of one write together, in order (a batch's items in index order). */
export type ListingChangesListener = (tx: Db, changes: ListingChange[]) => Promise<void>;
/**
 * The same recording as CTEs of the statement that changes the listings: `source` names a CTE
 * with one row per changed listing (`ord`, their order, `data`, the event's data as json:
 * `{"listing": <owner's view>}`, and the listing's `listing_id`, `seller_id` and `app_id`, the
 * app that created it: null, nobody to notify). Null when the listener records nothing.
 */
export type ListingChangesStatementListener = (
  change: StatementChange,
  source: string,
) => SQL | null;

/** The CTEs that record a statement's changes, given the name of its CTE of changed rows. */
export type RecordInStatement = (source: string) => SQL[];

export class ListingChanges {
  private readonly listeners: ListingChangesListener[] = [];
  /**
   * The statement forms of some listeners: while one has none, every write takes the transaction
   * path.
   */
  private readonly statementListeners: ListingChangesStatementListener[] = [];

  /** Called once per change. */
  subscribe(listener: ListingChangeListener): void {
    this.listeners.push(async (tx, changes) => {
      for (const change of changes) await listener(tx, change);
    });
  }

  /**
   * Called once per write with all of its changes (the outbox records them in one statement),
   * or, when `inStatement` is given, asked for SQL to run within the write's own statement.
   */
  subscribeAll(
    listener: ListingChangesListener,
    inStatement?: ListingChangesStatementListener,
  ): void {
    this.listeners.push(listener);
    if (inStatement) this.statementListeners.push(inStatement);
  }

  announce(tx: Db, change: ListingChange): Promise<void> {
    return this.announceAll(tx, [change]);
  }

  async announceAll(tx: Db, changes: ListingChange[]): Promise<void> {
    if (changes.length === 0) return;
    for (const listener of this.listeners) await listener(tx, changes);
  }

  /**
   * The listeners' recording of `change` as CTEs for the statement that makes it (see
   * ListingChangesStatementListener), or undefined when a listener can only run in a
   * transaction: the caller then makes the change in one and calls announce(). Each listener's
   * CTEs have names of their own (the outbox's, the saved searches' queue).
   */
  inStatement(change: StatementChange): RecordInStatement | undefined {
    if (this.statementListeners.length < this.listeners.length) return undefined;
    return (source) =>
      this.statementListeners.flatMap((listener) => listener(change, source) ?? []);
  }
}
