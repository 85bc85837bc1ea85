/**
 * Listing writes: through the state machine, with every change announced inside its statement
 * or transaction. Reads are listings-read-service.ts's.
 */
import type { AppsService } from '../apps/apps-service.ts';
import type { Db } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { ApiError, ConflictError, InternalError, ValidationError } from '../errors.ts';
import type {
  BatchItemResult,
  Listing,
  ListingCreate,
  ListingStatus,
  ListingUpdate,
} from '../generated/schemas.ts';
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

export const BATCH_MAX = 25;
const EXTERNAL_ID_KEY = 'listings_seller_environment_external_id_key';

export interface WriteResult {
  listing: Listing;
  created: boolean;
}

export interface BatchOutcome {
  results: BatchItemResult[];
  created: number;
  updated: number;
  failed: number;
}

/** Announces a listing change (now, or collected for later) and returns the listing's view. */
type Announce = (row: ListingRow, event: states.ListingEventType) => Promise<Listing>;

/** A batch's items, parsed; undefined where an item failed its checks. */
type BatchInputs = (CreateInput | undefined)[];
/** A batch's results by item index, filled in as each item is settled. */
type BatchResults = BatchItemResult[];

/** Validates one batch item against the document's ListingCreate schema. */
export type ItemValidator = (item: unknown) => ValidationError | null;

export class ListingsService {
  /** Apps whose sandbox_listing milestone is committed (see afterCommit). */
  private readonly sandboxMilestoneDone = new Set<string>();

  constructor(
    private readonly listings: ListingsRepository,
    private readonly apps: AppsService,
    private readonly changes: ListingChanges,
    private readonly validateItem: ItemValidator,
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

  /**
   * POST /listings/batch: items in index order, each on its own. A batch of new listings only
   * (no external_id) whose changes can be recorded in the statement is one insert
   * (batchInOneStatement); any other batch runs in one transaction (batchInTransaction).
   */
  async batch(caller: Caller, items: unknown[]): Promise<BatchOutcome> {
    const results: BatchResults = new Array(items.length);
    const inputs = items.map((item, index) => {
      try {
        return this.batchInput(item);
      } catch (err) {
        results[index] = failure(index, err);
        return undefined;
      }
    });
    const recordChanges = this.inStatementRecorder(caller);
    if (recordChanges && inputs.every((input) => !input?.externalId)) {
      await this.batchInOneStatement(caller, inputs, results, recordChanges);
      return outcome(results);
    }
    await this.listings.transaction((tx) => this.batchInTransaction(tx, caller, inputs, results));
    const done = outcome(results);
    if (done.created > 0) this.afterCommit(caller);
    return done;
  }

  /** One batch item, checked as POST /listings checks its body; throws its failure. */
  private batchInput(item: unknown): CreateInput {
    const invalid = this.validateItem(item);
    if (invalid) throw invalid;
    const input = createInput(item as ListingCreate, undefined);
    states.create(input.requestedStatus, photosOf(input.create));
    return input;
  }

  /**
   * Every valid item in one insert that also records their changes: atomic without a transaction.
   */
  private async batchInOneStatement(
    caller: Caller,
    inputs: BatchInputs,
    results: BatchResults,
    recordChanges: RecordInStatement,
  ): Promise<void> {
    const valid = inputs.flatMap((input, index) => (input ? [index] : []));
    if (valid.length === 0) return;
    const items = valid.map((index) => inputs[index]!.create);
    const rows = await retryOnOrderingClash(() =>
      this.listings.insertMany(owner(caller), items, { recordChanges }),
    );
    if (rows.length !== valid.length)
      throw new InternalError('a batch insert without external_ids skipped an item');
    for (const row of rows) {
      const index = valid[row.ord]!;
      results[index] = { index, ok: true, status: 201, data: listingView(row, true) };
    }
  }

  /**
   * The batch in one transaction: the new listings in one set-based insert, then, item by item
   * in index order, each upsert (and anything the insert left out) on the single-item path in
   * a savepoint, so one failing item never undoes another. The items' changes are announced
   * together at the end, in index order: the outbox records them in one statement instead of
   * one (plus a savepoint) per item.
   */
  private async batchInTransaction(
    tx: Db,
    caller: Caller,
    inputs: BatchInputs,
    results: BatchResults,
  ): Promise<void> {
    const inserted = await this.insertNewItems(tx, caller, inputs);
    const changes: ListingChange[] = [];
    let createdCount = 0;
    for (const [index, input] of inputs.entries()) {
      if (!input) continue;
      try {
        const { listing, created, change } = await this.writeBatchItem(
          tx,
          caller,
          input,
          inserted.get(index),
        );
        if (change) changes.push(change);
        if (created) createdCount += 1;
        results[index] = { index, ok: true, status: created ? 201 : 200, data: listing };
      } catch (err) {
        // failure() rethrows an unexpected error: the whole request fails, nothing is written.
        results[index] = failure(index, err);
      }
    }
    await this.changes.announceAll(tx, changes);
    if (createdCount > 0) await this.afterCreates(tx, caller, createdCount);
  }

  /**
   * Inserts in one statement, in a savepoint, the items that are surely new listings: no
   * external_id, or one neither stored nor earlier in the batch. Returns their rows by item index.
   * A concurrent writer taking a published_at undoes only that savepoint: every item then takes
   * the single-item path.
   */
  private async insertNewItems(
    tx: Db,
    caller: Caller,
    inputs: BatchInputs,
  ): Promise<Map<number, ListingRow>> {
    const inserted = new Map<number, ListingRow>();
    const fresh = await this.newItemIndexes(tx, caller, inputs);
    if (fresh.length === 0) return inserted;
    try {
      const items = fresh.map((index) => inputs[index]!.create);
      const rows = await tx.transaction((sp) =>
        this.listings.insertMany(owner(caller), items, {}, sp),
      );
      for (const row of rows) inserted.set(fresh[row.ord]!, row);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    return inserted;
  }

  /**
   * The indexes of the valid items with no external_id or the first use of a new one (locks the
   * stored ones).
   */
  private async newItemIndexes(tx: Db, caller: Caller, inputs: BatchInputs): Promise<number[]> {
    const externalIds = [
      ...new Set(inputs.flatMap((input) => (input?.externalId ? [input.externalId] : []))),
    ];
    const stored = await this.listings.findByExternalIds(
      owner(caller),
      externalIds,
      { forUpdate: true },
      tx,
    );
    const taken = new Set(stored.map((row) => row.external_id));
    return inputs.flatMap((input, index) => {
      if (!input) return [];
      if (input.externalId) {
        if (taken.has(input.externalId)) return [];
        taken.add(input.externalId);
      }
      return [index];
    });
  }

  /**
   * One item of a batch in its transaction: its row from the set-based insert, or the
   * single-item path in a savepoint. Its change is returned to announce with the others, and
   * only once its savepoint is released (an item that fails has no change).
   */
  private async writeBatchItem(
    tx: Db,
    caller: Caller,
    input: CreateInput,
    inserted: ListingRow | undefined,
  ): Promise<WriteResult & { change: ListingChange | undefined }> {
    let change: ListingChange | undefined;
    const collect: Announce = async (row, event) => {
      change = this.change(row, event);
      return change.listing;
    };
    const result = inserted
      ? { listing: await collect(inserted, 'listing.created'), created: true }
      : await tx.transaction((sp) => this.createOrUpsert(sp, caller, input, collect));
    return { ...result, change };
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
  private async createOrUpsert(
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
  private inStatementRecorder(caller: Caller): RecordInStatement | undefined {
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
  private change(row: ListingRow, event: states.ListingEventType): ListingChange {
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
  private async afterCreates(tx: Db, caller: Caller, count: number): Promise<void> {
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
  private afterCommit(caller: Caller): void {
    if (caller.environment === 'sandbox' && caller.appId)
      this.sandboxMilestoneDone.add(caller.appId);
  }
}

function owner(caller: Caller) {
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

function photosOf(fields: { cover_image_url: string | null; image_urls: string[] }): states.Photos {
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
async function retryOnOrderingClash<T>(write: () => Promise<T>): Promise<T> {
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

function outcome(results: BatchItemResult[]): BatchOutcome {
  const created = results.filter((r) => r.ok && r.status === 201).length;
  const failed = results.filter((r) => !r.ok).length;
  return { results, created, updated: results.length - created - failed, failed };
}

function failure(index: number, err: unknown): BatchItemResult {
  if (!(err instanceof ApiError) || !err.expose) throw err;
  return {
    index,
    ok: false,
    status: err.statusCode,
    error: {
      code: err.code,
      message: err.message,
      ...(err.details?.length ? { details: err.details } : {}),
    },
  };
}
