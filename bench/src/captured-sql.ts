/**
 * The app's own SQL, captured from ListingsRepository without a database: the repository is
 * handed Drizzle over a Connection of its own (src/db/database.ts) that records each statement
 * as it would be sent, with its values bound. The bare baseline
 * then runs exactly that text, so the baseline and the API can only differ in what the stack
 * adds around the query, and a change to the app's SQL changes both sides at once.
 */
import { drizzleOn, type Connection } from '../../src/db/database.ts';
import { completeSandboxMilestone } from '../../src/apps/apps-repository.ts';
import { ListingChanges } from '../../src/listings/listing-changes.ts';
import { ListingsRepository, type NewListing } from '../../src/listings/listings-repository.ts';
import { DEFAULT_PAGE_SIZE } from '../../src/listings/listings-read-service.ts';
import { enqueueMatches } from '../../src/saved-searches/matcher-worker.ts';
import { recordEventsInStatement } from '../../src/events/events-repository.ts';

export interface CapturedQuery {
  text: string;
  params: unknown[];
}

async function capture(
  run: (repository: ListingsRepository) => Promise<unknown>,
): Promise<CapturedQuery> {
  const queries: CapturedQuery[] = [];
  const connection: Connection = {
    query: async (text, params) => {
      queries.push({ text, params });
      return [];
    },
    transaction: (work) => work(connection),
  };
  await run(new ListingsRepository(drizzleOn(connection)));
  if (queries.length !== 1)
    throw new Error(`expected one statement, the repository ran ${queries.length}`);
  return queries[0]!;
}

/** Placeholders the captured parameters are recognised by, and replaced at request time. */
export const SENTINEL = {
  id: '00000000-0000-4000-8000-00000000b001',
  cursor: '1999-01-01T00:00:00.000001Z',
  records: '__bench_records__',
  title: '__bench_title__',
  price: 987_654_321,
  externalId: '__bench_external_id__',
  externalIds: '__bench_external_ids__',
} as const;

/** Replaces the sentinel values of a captured query's parameters. */
export function bind(query: CapturedQuery, values: Map<unknown, unknown>): unknown[] {
  return query.params.map((p) => (values.has(p) ? values.get(p) : p));
}

export interface Owner {
  sellerId: string;
  appId: string;
}

export async function captureListingQueries(owner: Owner) {
  const writer = { sellerId: owner.sellerId, appId: owner.appId, environment: 'sandbox' as const };
  const pageFirst = await capture((r) => r.page({ kind: 'public' }, { limit: DEFAULT_PAGE_SIZE }));
  const pageAfter = await capture((r) =>
    r.page({ kind: 'public' }, { limit: DEFAULT_PAGE_SIZE, cursor: SENTINEL.cursor }),
  );
  const byId = await capture((r) => r.findById(SENTINEL.id));
  // insert serialises its items itself: capture with one item, then swap the JSON text.
  const item: NewListing = {
    title: 'x',
    description: null,
    category: null,
    condition: null,
    brand: null,
    size: null,
    color: null,
    price_cents: 1,
    currency: 'usd',
    impact_mode: false,
    cover_image_url: null,
    image_urls: [],
    tags: [],
    status: 'draft',
    external_id: null,
  };
  // What a create runs (ListingWritesService.create): the insert with what src/services.ts
  // records in the same statement (src/listings/listing-changes.ts): the listing's webhook event
  // (the outbox), its row of the saved searches' match queue, the app's sandbox milestone.
  const recorded = new ListingChanges([
    recordEventsInStatement,
    enqueueMatches,
    completeSandboxMilestone,
  ]);
  const insert = await capture((r) => r.insert(writer, [item], recorded));
  const recordsJson = JSON.stringify([{ ord: 0, ...item }]);
  const recordsIndex = insert.params.indexOf(recordsJson);
  if (recordsIndex === -1)
    throw new Error('insert no longer takes its items as one JSON parameter');
  insert.params[recordsIndex] = SENTINEL.records;
  // What PATCH { title, price_cents } runs (ListingWritesService.update): the guarded UPDATE with
  // its recordings in the same statement; and the UPDATE alone, to show what they cost.
  const target = { id: SENTINEL.id, sellerId: owner.sellerId, environment: 'sandbox' as const };
  const fields = { title: SENTINEL.title, price_cents: SENTINEL.price };
  const update = await capture((r) => r.update(target, fields, 'listing.updated', recorded));
  const updateOnly = await capture((r) =>
    r.update(target, fields, 'listing.updated', new ListingChanges([])),
  );
  // What an idempotent replay that changes nothing runs: the external_id lookup, and no more.
  const lookup = await capture((r) => r.findByExternalIds(writer, [SENTINEL.externalId]));
  const keysIndex = lookup.params.indexOf(JSON.stringify([SENTINEL.externalId]));
  if (keysIndex === -1)
    throw new Error('findByExternalIds no longer takes its ids as one JSON parameter');
  lookup.params[keysIndex] = SENTINEL.externalIds;
  return { pageFirst, pageAfter, byId, insert, update, updateOnly, lookup };
}
