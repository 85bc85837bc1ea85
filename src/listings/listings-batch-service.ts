/**
 * POST /listings/batch (OpenAPI "Batch"): up to 25 items in index order, each on its own and
 * each as a single POST /listings would be (the write steps are ListingsService's), one failing
 * item never undoing another.
 */
import type { Db } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { ApiError, errorObject, InternalError, type ValidationError } from '../errors.ts';
import type { BatchItemResult, ListingCreate } from '../generated/schemas.ts';
import type { Caller } from '../access.ts';
import { createInput, type CreateInput } from './listing-input.ts';
import type { ListingChange, ListingChanges, RecordInStatement } from './listing-changes.ts';
import type { ListingRow, ListingsRepository } from './listings-repository.ts';
import {
  owner,
  photosOf,
  retryOnOrderingClash,
  type Announce,
  type ListingsService,
  type WriteResult,
} from './listings-service.ts';
import { listingView } from './listing-view.ts';
import * as states from './state-machine.ts';

export const BATCH_MAX = 25;

export interface BatchOutcome {
  results: BatchItemResult[];
  created: number;
  updated: number;
  failed: number;
}

/** A batch's items, parsed; undefined where an item failed its checks. */
type BatchInputs = (CreateInput | undefined)[];
/** A batch's results by item index, filled in as each item is settled. */
type BatchResults = BatchItemResult[];

/** Validates one batch item against the document's ListingCreate schema. */
export type ItemValidator = (item: unknown) => ValidationError | null;

export class ListingsBatchService {
  constructor(
    private readonly listings: ListingsRepository,
    private readonly writes: ListingsService,
    private readonly changes: ListingChanges,
    private readonly validateItem: ItemValidator,
  ) {}

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
    const recordChanges = this.writes.inStatementRecorder(caller);
    if (recordChanges && inputs.every((input) => !input?.externalId)) {
      await this.batchInOneStatement(caller, inputs, results, recordChanges);
      return outcome(results);
    }
    await this.listings.transaction((tx) => this.batchInTransaction(tx, caller, inputs, results));
    const done = outcome(results);
    if (done.created > 0) this.writes.afterCommit(caller);
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
    if (createdCount > 0) await this.writes.afterCreates(tx, caller, createdCount);
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
      change = this.writes.change(row, event);
      return change.listing;
    };
    const result = inserted
      ? { listing: await collect(inserted, 'listing.created'), created: true }
      : await tx.transaction((sp) => this.writes.createOrUpsert(sp, caller, input, collect));
    return { ...result, change };
  }
}

function outcome(results: BatchItemResult[]): BatchOutcome {
  const created = results.filter((r) => r.ok && r.status === 201).length;
  const failed = results.filter((r) => !r.ok).length;
  return { results, created, updated: results.length - created - failed, failed };
}

/** A failed item's result; an unexpected error is not an item's failure: it is rethrown. */
function failure(index: number, err: unknown): BatchItemResult {
  if (!(err instanceof ApiError) || !err.expose) throw err;
  return { index, ok: false, status: err.statusCode, error: errorObject(err) };
}
