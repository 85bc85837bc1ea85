/**
 * Listing writes: through the state machine, each one statement that records its change
 * (listing-changes.ts). Reads are listings-read-service.ts's.
 */
import { isUniqueViolation } from '../db/errors.ts';
import { ConflictError, InternalError } from '../errors.ts';
import type { Listing, ListingCreate, ListingStatus, ListingUpdate } from '../generated/schemas.ts';
import { assertCanWrite, type Caller } from '../access.ts';
import { createInput, updateInput, type CreateInput, type FieldChanges } from './listing-input.ts';
import type { WakeUps } from '../lib/wake-ups.ts';
import { queuedLanes, type ListingChanges, type QueuedLanes } from './listing-changes.ts';
import type {
  ListingRow,
  ListingsRepository,
  ListingWrite,
  NewListing,
} from './listings-repository.ts';
import { access, listingView } from './listing-view.ts';
import * as states from './state-machine.ts';

const EXTERNAL_ID_KEY = 'listings_seller_environment_external_id_key';

export interface WriteResult {
  listing: Listing;
  created: boolean;
}

export class ListingWritesService {
  /**
   * `changes` records each write in its statement; `wakeUps` wakes the background loops its
   * recordings queued work for, once it has committed.
   */
  constructor(
    private readonly listings: ListingsRepository,
    private readonly changes: ListingChanges,
    private readonly wakeUps: WakeUps,
  ) {}

  /** POST /listings: creates, or upserts the seller's listing with the same external_id. */
  async create(
    caller: Caller,
    body: ListingCreate,
    idempotencyKey: string | undefined,
  ): Promise<WriteResult> {
    const input = createInput(body, idempotencyKey);
    states.create(input.requestedStatus, photosOf(input.create));
    return this.createOrUpsert(caller, input);
  }

  /**
   * One checked create (POST /listings, or a batch item): with an external_id the lookup comes
   * first: a replay that changes nothing is that read alone, an upsert one update statement
   * (writeListing). A new listing is one insert statement.
   */
  async createOrUpsert(caller: Caller, input: CreateInput): Promise<WriteResult> {
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      if (input.externalId) {
        const [current] = await this.listings.findByExternalIds(owner(caller), [input.externalId]);
        if (current) return this.upsert(caller, input, current);
      }
      const [row] = await this.insert(caller, [input.create]);
      if (row) return { listing: listingView(row, true), created: true };
      // Skipped: a concurrent request created this external_id after the lookup. Look again.
    }
    throw new InternalError('an external_id neither found nor insertable');
  }

  /**
   * New listings of the caller in one statement, in index order (an item whose external_id
   * exists is skipped, missing from the result).
   */
  async insert(caller: Caller, items: NewListing[]): Promise<(ListingRow & { ord: number })[]> {
    const rows = await retryOnOrderingClash(() =>
      this.listings.insert(owner(caller), items, this.changes),
    );
    this.wakeFor(rows);
    return rows;
  }

  /** An upsert of the caller's listing `current`: a read when it changes nothing. */
  private async upsert(
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
   * Writes one of the caller's listings (fields and status) with its event, in one statement.
   * The rules are the statement's conditions (ListingsRepository.update); when it wrote
   * nothing, `refuse` is given the listing as it is now and throws why, or returns the answer
   * (DELETE of an archived listing); when it does neither, a concurrent write changed what the
   * rules saw between the two statements, and the write is tried again.
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
        const row = await retryOnOrderingClash(() =>
          this.listings.update(target, changes, event, this.changes),
        );
        if (row) {
          this.wakeFor([row]);
          return listingView(row, true);
        }
      }
      const answer = refuse(await this.listings.findById(id));
      if (answer) return listingView(answer, true);
    }
    throw new ConflictError('This listing kept changing while the request was applied; try again.');
  }

  /**
   * The loops a write's statement queued work for (its answer says which: queuedLanes) look
   * once it has committed; the others are not woken for it.
   */
  private wakeFor(rows: readonly QueuedLanes[]): void {
    for (const lane of queuedLanes(rows)) this.wakeUps.afterCommit(lane);
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
