/**
 * Listing writes: through the state machine, with every change announced inside its statement
 * or transaction. Reads are listings-read-service.ts's.
 */
import type { AppsService } from '../apps/apps-service.ts';
import type { Db } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { ConflictError, InternalError } from '../errors.ts';
import type { Listing, ListingCreate, ListingStatus, ListingUpdate } from '../generated/schemas.ts';
import { assertCanWrite, type Caller } from '../access.ts';
import { createInput, updateInput, type CreateInput, type FieldChanges } from './listing-input.ts';
import type { ListingChange, ListingChanges, RecordInStatement } from './listing-changes.ts';
import type {
  ListingRow,
  ListingsRepository,
  ListingTarget,
  ListingWrite,
} from './listings-repository.ts';
import { access, listingView } from './listing-view.ts';
import * as states from './state-machine.ts';

const EXTERNAL_ID_KEY = 'listings_seller_environment_external_id_key';

export interface WriteResult {
  listing: Listing;
  created: boolean;
}

/** Announces a listing change (now, or collected for later) and returns the listing's view. */
export type Announce = (row: ListingRow, event: states.ListingEventType) => Promise<Listing>;

export class ListingsService {
  /** Apps whose sandbox_listing milestone is committed (see afterCommit). */
  private readonly sandboxMilestoneDone = new Set<string>();

  constructor(
    private readonly listings: ListingsRepository,
    private readonly apps: AppsService,
    private readonly changes: ListingChanges,
  ) {}

  /**
   * POST /listings: creates, or upserts the seller's listing with the same external_id. With an
   * external_id the lookup comes first: a replay that changes nothing is that read alone, an
   * upsert one update statement (writeListing). A new listing is one insert that records its
   * change itself, unless it must take a transaction (inStatementRecorder).
   */
  async create(
    caller: Caller,
    body: ListingCreate,
    idempotencyKey: string | undefined,
  ): Promise<WriteResult> {
    const input = createInput(body, idempotencyKey);
    states.create(input.requestedStatus, photosOf(input.create));
    const recordChanges = this.inStatementRecorder(caller);
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      if (input.externalId) {
        const [current] = await this.listings.findByExternalIds(owner(caller), [input.externalId]);
        if (current) return this.upsertInOneStatement(caller, input, current);
      }
      if (!recordChanges) return this.createInTransaction(caller, input);
      const [row] = await retryOnOrderingClash(() =>
        this.listings.insertMany(owner(caller), [input.create], { recordChanges }),
      );
      if (row) return { listing: listingView(row, true), created: true };
      // Skipped: a concurrent request created this external_id after the lookup. Look again.
    }
    throw new InternalError('an external_id neither found nor insertable');
  }

  /** An upsert of the caller's listing `current`: a read when it changes nothing. */
  private async upsertInOneStatement(
    caller: Caller,
    input: CreateInput,
    current: ListingRow,
  ): Promise<WriteResult> {
    if (isNoOp(current, input)) return { listing: listingView(current, true), created: false };
    const listing = await this.writeListing(
      caller,
      current.id,
      { ...input.changes, status: input.requestedStatus },
      'listing.updated',
      (row) => this.refuseUpdate(caller, row, input.requestedStatus, input.changes),
    );
    return { listing, created: false };
  }

  /**
   * A create whose change a listener records in the transaction, or the app's first sandbox create.
   */
  private async createInTransaction(caller: Caller, input: CreateInput): Promise<WriteResult> {
    const result = await this.listings.transaction(async (tx) => {
      const written = await this.createOrUpsert(tx, caller, input);
      if (written.created) await this.afterCreates(tx, caller, 1);
      return written;
    });
    if (result.created) this.afterCommit(caller);
    return result;
  }

  /** PATCH /listings/{id}: one statement (writeListing). */
  async update(caller: Caller, id: string, body: ListingUpdate): Promise<Listing> {
    const input = updateInput(body);
    const refuse = (row: ListingRow | undefined) =>
      this.refuseUpdate(caller, row, input.requestedStatus, input.changes);
    // Never written by PATCH: the state machine says why (409 on an archived listing, else 400).
    if (input.requestedStatus === 'archived') {
      refuse(await this.listings.findById(id));
      throw new InternalError('the state machine let PATCH archive a listing');
    }
    try {
      return await this.writeListing(
        caller,
        id,
        { ...input.changes, status: input.requestedStatus, external_id: input.externalId },
        'listing.updated',
        refuse,
      );
    } catch (err) {
      if (isUniqueViolation(err, EXTERNAL_ID_KEY)) {
        throw new ConflictError(
          'Another of your listings in this environment already uses this external_id.',
        );
      }
      throw err;
    }
  }

  /** DELETE /listings/{id}: one statement; an archived listing is answered as it is. */
  async archive(caller: Caller, id: string): Promise<Listing> {
    return this.writeListing(caller, id, { status: 'archived' }, 'listing.archived', (row) => {
      assertCanWrite(caller, row && access(row));
      return states.archive(row!.status).event === null ? row : undefined;
    });
  }

  /**
   * Why PATCH or an upsert wrote nothing: throws it (404, 403, 409, 400) from the listing as it
   * is now, as the state machine decides; returns nothing when the rules allow the write now.
   */
  private refuseUpdate(
    caller: Caller,
    row: ListingRow | undefined,
    requested: ListingStatus | undefined,
    changes: FieldChanges,
  ): undefined {
    assertCanWrite(caller, row && access(row));
    states.update(row!.status, requested, photosAfter(row!, changes));
    return undefined;
  }

  /**
   * Writes one of the caller's listings (fields and status) with its event: one statement when
   * the listeners can record in it, else a transaction with announce() (a listener that can only
   * record in a transaction). The rules are the statement's conditions (updateListing); when
   * it wrote nothing, `refuse` is given the listing as it is now and throws why, or returns the
   * answer (DELETE of an archived listing); when it does neither, a concurrent write changed what
   * the rules saw between the two statements, and the write is tried again.
   */
  private async writeListing(
    caller: Caller,
    id: string,
    changes: ListingWrite,
    event: states.ListingEventType,
    refuse: (row: ListingRow | undefined) => ListingRow | undefined,
  ): Promise<Listing> {
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      // Without a seller nothing is written: refuse throws (nobody owns a listing without one).
      if (caller.userId) {
        const target = { id, sellerId: caller.userId, environment: caller.environment };
        const written = await this.writeOnce(target, changes, event);
        if (written) return written;
      }
      const answer = refuse(await this.listings.findById(id));
      if (answer) return listingView(answer, true);
    }
    throw new ConflictError('This listing kept changing while the request was applied; try again.');
  }

  private async writeOnce(
    target: ListingTarget,
    changes: ListingWrite,
    event: states.ListingEventType,
  ): Promise<Listing | undefined> {
    const recordChanges = this.changes.inStatement({
      type: event,
      environment: target.environment,
    });
    if (recordChanges) {
      const row = await retryOnOrderingClash(() =>
        this.listings.updateListing(target, changes, { recordChanges }),
      );
      return row && listingView(row, true);
    }
    return this.listings.transaction(async (tx) => {
      const row = await this.listings.updateListing(target, changes, {}, tx);
      return row && this.announce(tx, row, event);
    });
  }

  /** One item: insert, or (its external_id exists, maybe created concurrently) upsert it. */
  async createOrUpsert(
    tx: Db,
    caller: Caller,
    input: CreateInput,
    announce: Announce = (row, event) => this.announce(tx, row, event),
  ): Promise<WriteResult> {
    const [row] = await retryOnOrderingClash(() =>
      tx.transaction((sp) => this.listings.insertMany(owner(caller), [input.create], {}, sp)),
    );
    if (row) return { listing: await announce(row, 'listing.created'), created: true };
    // ON CONFLICT DO NOTHING skipped it: the external_id exists (now committed). Upsert it.
    return this.upsert(tx, caller, input, announce);
  }

  /**
   * The seller's listing with the input's external_id, updated with the fields the body sent;
   * left alone (no new updated_at, no event) when that would change nothing.
   */
  private async upsert(
    tx: Db,
    caller: Caller,
    input: CreateInput,
    announce: Announce = (row, event) => this.announce(tx, row, event),
  ): Promise<WriteResult> {
    const [current] = await this.listings.findByExternalIds(
      owner(caller),
      [input.externalId!],
      { forUpdate: true },
      tx,
    );
    if (!current) throw new InternalError('external_id conflict without a row');
    if (isNoOp(current, input)) return { listing: listingView(current, true), created: false };
    const transition = states.update(
      current.status,
      input.requestedStatus,
      photosAfter(current, input.changes),
    );
    // Locked above and checked by the state machine: the statement's rules cannot refuse it.
    const updated = await this.listings.updateListing(
      { id: current.id, ...owner(caller) },
      { ...input.changes, status: transition.status },
      {},
      tx,
    );
    if (!updated) throw new InternalError('a locked listing refused its upsert');
    return { listing: await announce(updated, transition.event), created: false };
  }

  /**
   * How to record a create's changes inside its insert statement (no transaction needed), or
   * undefined when the create must take the transaction path: a listener can only record in a
   * transaction, or this is the app's first sandbox create here (its milestone goes with it).
   */
  inStatementRecorder(caller: Caller): RecordInStatement | undefined {
    if (
      caller.environment === 'sandbox' &&
      caller.appId &&
      !this.sandboxMilestoneDone.has(caller.appId)
    )
      return undefined;
    return this.changes.inStatement({
      type: 'listing.created',
      environment: caller.environment,
    });
  }

  /**
   * The change to announce: the owner's view of the listing after it, for the app that created
   * the listing (whichever credential made this change: the OpenAPI "Webhooks and events").
   */
  change(row: ListingRow, event: states.ListingEventType): ListingChange {
    return {
      type: event,
      listing: listingView(row, true),
      environment: row.environment,
      appId: row.app_id,
    };
  }

  private async announce(
    tx: Db,
    row: ListingRow,
    event: states.ListingEventType,
  ): Promise<Listing> {
    const change = this.change(row, event);
    await this.changes.announce(tx, change);
    return change.listing;
  }

  /**
   * A sandbox create completes the app's sandbox_listing milestone (docs/portal.md, the go-live
   * checklist).
   */
  async afterCreates(tx: Db, caller: Caller, count: number): Promise<void> {
    if (
      count > 0 &&
      caller.environment === 'sandbox' &&
      caller.appId &&
      !this.sandboxMilestoneDone.has(caller.appId)
    ) {
      await this.apps.completeMilestone(caller.appId, 'sandbox_listing', tx);
    }
  }

  /**
   * Once a create's transaction has committed, its app's milestone is known to be recorded
   * (milestones are never undone), so later creates skip that statement: one fewer per
   * POST /listings (`npm run bench`). Bounded by the number of apps.
   */
  afterCommit(caller: Caller): void {
    if (caller.environment === 'sandbox' && caller.appId)
      this.sandboxMilestoneDone.add(caller.appId);
  }
}

export function owner(caller: Caller) {
  if (!caller.userId) throw new InternalError('a write without a seller');
  return { sellerId: caller.userId, appId: caller.appId, environment: caller.environment };
}

/**
 * An upsert that would change nothing: every field the body sent equals the stored value and
 * the status stays (the OpenAPI "Idempotency and upsert"). The state machine's rules still
 * apply, so a replay on an archived listing is a 409 as any upsert of it.
 */
function isNoOp(current: ListingRow, input: CreateInput): boolean {
  const transition = states.update(
    current.status,
    input.requestedStatus,
    photosAfter(current, input.changes),
  );
  if (transition.status !== current.status) return false;
  return (Object.keys(input.changes) as (keyof FieldChanges)[]).every((field) =>
    sameValue(current[field], input.changes[field]),
  );
}

function sameValue(stored: unknown, sent: unknown): boolean {
  if (Array.isArray(stored) && Array.isArray(sent))
    return stored.length === sent.length && stored.every((v, i) => v === sent[i]);
  return stored === sent;
}

export function photosOf(fields: {
  cover_image_url: string | null;
  image_urls: string[];
}): states.Photos {
  return { coverImageUrl: fields.cover_image_url, imageUrls: fields.image_urls };
}

function photosAfter(row: ListingRow, changes: FieldChanges): states.Photos {
  return {
    coverImageUrl:
      changes.cover_image_url !== undefined ? changes.cover_image_url : row.cover_image_url,
    imageUrls: changes.image_urls ?? row.image_urls,
  };
}

/**
 * published_at and the events' created_at are ordering keys that cannot clash
 * (src/db/ordering-key.ts); their unique indexes stay as the guard, and were one ever taken the
 * statement, which then wrote nothing, runs again. Only those keys: anything else (an external_id
 * another listing uses) is the caller's to answer.
 */
export async function retryOnOrderingClash<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await write();
    } catch (err) {
      const clash =
        isUniqueViolation(err, 'listings_environment_published_at_key') ||
        isUniqueViolation(err, 'webhook_events_environment_created_at_key');
      if (attempt >= 5 || !clash) throw err;
    }
  }
}
