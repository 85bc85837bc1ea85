/**
 * From a validated request body to stored fields: the price rule (exactly one of
 * price_cents / price_dollars), the external_id / Idempotency-Key rule, and create-time
 * defaults. Schema validation (lengths, formats, unknown fields) happened before this.
 */
import { ValidationError } from '../errors.ts';
import type { ListingCreate, ListingStatus, ListingUpdate } from '../generated/schemas.ts';
import type { ListingFields, NewListing } from './listing-row.ts';
import { dollarsToCents } from './money.ts';

/** Fields an upsert copies from the body onto the stored listing: only those sent. */
export type FieldChanges = Partial<ListingFields>;

export interface CreateInput {
  /** The listing if this creates one (create-time defaults applied). */
  create: NewListing;
  /** The changes if this upserts an existing external_id: only the fields the body sent. */
  changes: FieldChanges;
  requestedStatus: ListingStatus | undefined;
  externalId: string | null;
}

/**
 * The price rule is also in the document's schemas (ListingCreate, ListingUpdate), which refuse
 * both and neither before a handler runs, with the same details paths; it stays here because
 * the static types cannot say it, so the service holds for a caller that skipped the schema.
 */
function priceCents(
  body: { price_cents?: number; price_dollars?: number },
  required: boolean,
): number | undefined {
  const hasCents = body.price_cents !== undefined;
  const hasDollars = body.price_dollars !== undefined;
  if (hasCents && hasDollars) {
    throw ValidationError.field(
      '/price_dollars',
      'cannot be sent together with price_cents; send exactly one',
    );
  }
  if (hasDollars) return dollarsToCents(body.price_dollars!);
  if (hasCents) return body.price_cents!;
  if (required) throw ValidationError.field('/price_cents', 'is required (or price_dollars)');
  return undefined;
}

/**
 * PostgreSQL text cannot hold U+0000, and an unpaired surrogate is not text: 400, never a 500 or a
 * silent U+FFFD. The one rule for every JSON body whose texts are stored (listings, saved
 * searches): its top-level texts and the texts of its lists, named by their JSON Pointer.
 */
const UNSTORABLE = /\u0000|\p{Cs}/u;

export function checkStorableText(body: object): void {
  for (const [field, value] of Object.entries(body)) {
    const values: unknown[] = Array.isArray(value) ? value : [value];
    values.forEach((v, i) => {
      if (typeof v === 'string' && UNSTORABLE.test(v)) {
        const path = Array.isArray(value) ? `/${field}/${i}` : `/${field}`;
        throw ValidationError.field(
          path,
          'must not contain U+0000 or unpaired surrogate code units',
        );
      }
    });
  }
}

/** The fields present in a create or update body, as stored. */
function presentFields(body: ListingUpdate, cents: number | undefined): FieldChanges {
  const changes: FieldChanges = {};
  if (body.title !== undefined) changes.title = body.title;
  if (body.description !== undefined) changes.description = body.description;
  if (body.category !== undefined) changes.category = body.category;
  if (body.condition !== undefined) changes.condition = body.condition;
  if (body.brand !== undefined) changes.brand = body.brand;
  if (body.size !== undefined) changes.size = body.size;
  if (body.color !== undefined) changes.color = body.color;
  if (cents !== undefined) changes.price_cents = cents;
  if (body.currency !== undefined) changes.currency = body.currency;
  if (body.impact_mode !== undefined) changes.impact_mode = body.impact_mode;
  if (body.cover_image_url !== undefined) changes.cover_image_url = body.cover_image_url;
  if (body.image_urls !== undefined) changes.image_urls = body.image_urls;
  if (body.tags !== undefined) changes.tags = body.tags;
  return changes;
}

export function createInput(body: ListingCreate, idempotencyKey: string | undefined): CreateInput {
  if (
    idempotencyKey !== undefined &&
    body.external_id !== undefined &&
    body.external_id !== idempotencyKey
  ) {
    throw ValidationError.field(
      '/external_id',
      'must equal the Idempotency-Key header when both are sent',
    );
  }
  checkStorableText(body);
  const externalId = body.external_id ?? idempotencyKey ?? null;
  const changes = presentFields(body, priceCents(body, true));
  const create: NewListing = {
    title: body.title,
    description: null,
    category: null,
    condition: null,
    brand: null,
    size: null,
    color: null,
    currency: 'usd',
    impact_mode: false,
    cover_image_url: null,
    image_urls: [],
    tags: [],
    price_cents: changes.price_cents!,
    ...changes,
    status: body.status ?? 'draft',
    external_id: externalId,
  };
  return { create, changes, requestedStatus: body.status, externalId };
}

export interface UpdateInput {
  changes: FieldChanges;
  requestedStatus: ListingStatus | undefined;
  externalId: string | undefined;
}

export function updateInput(body: ListingUpdate): UpdateInput {
  checkStorableText(body);
  return {
    changes: presentFields(body, priceCents(body, false)),
    requestedStatus: body.status,
    externalId: body.external_id,
  };
}
