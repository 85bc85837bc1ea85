/**
 * POST /listings/batch (OpenAPI "Batch"): up to 25 items in index order, each on its own and
 * each as a single POST /listings would be (the write steps are ListingWritesService's), one
 * failing item never undoing another.
 */
import { ApiError, errorObject, type ValidationError } from '../errors.ts';
import type { BatchItemResult, ListingCreate } from '../generated/schemas.ts';
import type { Caller } from '../access.ts';
import { createInput, type CreateInput } from './listing-input.ts';
import type { ListingsRepository } from './listings-repository.ts';
import { owner, photosOf, type ListingWritesService } from './listing-writes-service.ts';
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
    private readonly writes: ListingWritesService,
    private readonly validateItem: ItemValidator,
  ) {}

  /**
   * POST /listings/batch: items in index order, each its own statement (its own transaction).
   * The items that are surely new listings (no external_id, or the first use of one not stored)
   * are inserted together, each run of consecutive ones in one statement, so a batch of new
   * listings is one insert; an item whose external_id is stored (or used by an earlier item)
   * takes the single-item path, after the items before it.
   */
  async batch(caller: Caller, items: unknown[]): Promise<BatchOutcome> {
    const results: BatchResults = new Array(items.length);
    const inputs: BatchInputs = items.map((item, index) => {
      try {
        return this.batchInput(item);
      } catch (err) {
        results[index] = failure(index, err);
        return undefined;
      }
    });
    const externalIds = [
      ...new Set(inputs.flatMap((input) => (input?.externalId ? [input.externalId] : []))),
    ];
    const stored = await this.listings.findByExternalIds(owner(caller), externalIds);
    const taken = new Set(stored.map((row) => row.external_id));
    let run: number[] = [];
    for (const [index, input] of inputs.entries()) {
      if (!input) continue;
      if (input.externalId && taken.has(input.externalId)) {
        await this.insertRun(caller, inputs, results, run);
        run = [];
        await this.writeItem(caller, input, index, results);
      } else {
        if (input.externalId) taken.add(input.externalId);
        run.push(index);
      }
    }
    await this.insertRun(caller, inputs, results, run);
    return outcome(results);
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
   * The items of `run` in one insert that records their changes. One whose external_id a
   * concurrent request created since the lookup was skipped: it takes the single-item path.
   */
  private async insertRun(
    caller: Caller,
    inputs: BatchInputs,
    results: BatchResults,
    run: number[],
  ): Promise<void> {
    if (run.length === 0) return;
    const rows = await this.writes.insert(
      caller,
      run.map((index) => inputs[index]!.create),
    );
    for (const row of rows) {
      const index = run[row.ord]!;
      results[index] = { index, ok: true, status: 201, data: listingView(row, true) };
    }
    for (const index of run)
      if (!results[index]) await this.writeItem(caller, inputs[index]!, index, results);
  }

  /** One item on the single-item path (POST /listings's): its result, or its failure. */
  private async writeItem(
    caller: Caller,
    input: CreateInput,
    index: number,
    results: BatchResults,
  ): Promise<void> {
    try {
      const { listing, created } = await this.writes.createOrUpsert(caller, input);
      results[index] = { index, ok: true, status: created ? 201 : 200, data: listing };
    } catch (err) {
      // failure() rethrows an unexpected error: the request fails (the items before it stay).
      results[index] = failure(index, err);
    }
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
