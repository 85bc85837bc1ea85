/**
 * The listings work of the benchmark's comparison servers (baseline-server.ts, peer-server.ts):
 * the app's own SQL (captured-sql.ts) on a postgres.js pool configured as the app's, and the
 * app's own JSON (listingView, the envelope's meta). What differs between those servers and the
 * API is then only the stack around it.
 */
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { SESSION_OPTIONS } from '../../src/db/postgres.ts';
import type { ListingCreate } from '../../src/generated/schemas.ts';
import type { ListingRow, NewListing } from '../../src/listings/listings-repository.ts';
import { listingView } from '../../src/listings/listing-view.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { bind, captureListingQueries, SENTINEL, type CapturedQuery } from './captured-sql.ts';

export interface BareListings {
  /** One feed page: { data, meta } as the API answers it (anonymous, public view). */
  page(limit: number, cursor: string | undefined): Promise<unknown>;
  /** A listing in the public view, or undefined. */
  byId(id: string): Promise<unknown>;
  /** Inserts the items (one statement, outbox included); rows in item order, owner view. */
  insert(items: ListingCreate[]): Promise<{ id: string; view: unknown }[]>;
  /** PATCH's statement (the UPDATE with its event); the owner view of the row. */
  update(id: string, title: string | undefined, priceCents: number | undefined): Promise<unknown>;
  /** The same UPDATE without the event: what the outbox adds to PATCH. */
  updateOnly(
    id: string,
    title: string | undefined,
    priceCents: number | undefined,
  ): Promise<unknown>;
  /** A no-op replay's statement, the external_id lookup: the owner view of the row, if any. */
  lookup(externalId: string): Promise<unknown>;
  /** An envelope's meta, as the API's (a fresh request id). */
  meta(extra?: Record<string, unknown>, environment?: string): Record<string, unknown>;
  /** The app's key lookup: the key's app, if the key is active. */
  keyApp(key: string): Promise<string | undefined>;
  close(): Promise<void>;
}

export async function openBareListings(env: NodeJS.ProcessEnv): Promise<BareListings> {
  const url = env.DATABASE_URL;
  const sellerId = env.BENCH_SELLER_ID;
  const appId = env.BENCH_APP_ID;
  if (!url || !sellerId || !appId)
    throw new Error('DATABASE_URL, BENCH_SELLER_ID and BENCH_APP_ID are required');

  const queries = await captureListingQueries({ sellerId, appId });
  const sql = postgres(url, {
    max: Number(env.BENCH_POOL ?? 10),
    onnotice: () => {},
    connection: { TimeZone: 'UTC' },
    // The same type handling as the app's client (src/db/postgres.ts): timestamps and dates as
    // text, json/jsonb parameters passed through as the JSON text they already are.
    types: SESSION_OPTIONS.types,
  });
  /** postgres.js prepares its statements by default (tagged templates); so does the floor. */
  const run = <T>(text: string, params: unknown[]) =>
    sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<T[]>;

  const meta = (extra: Record<string, unknown> = {}, environment = 'live') => ({
    version: 'v1',
    environment,
    request_id: `req_${randomUUID().replaceAll('-', '')}`,
    ...extra,
  });

  /** A published_at already taken (the keys cannot clash; the guard): retried, as the app does. */
  const insertRows = async (items: NewListing[]) => {
    const params = bind(
      queries.insert,
      new Map([[SENTINEL.records, JSON.stringify(items.map((item, ord) => ({ ord, ...item })))]]),
    );
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await run<ListingRow & { ord: number }>(queries.insert.text, params);
      } catch (err) {
        if (attempt >= 5 || (err as { code?: string }).code !== '23505') throw err;
      }
    }
  };

  const updateRow = async (
    query: CapturedQuery,
    id: string,
    title: string | undefined,
    priceCents: number | undefined,
  ) => {
    const values = new Map<unknown, unknown>([
      [SENTINEL.id, id],
      [SENTINEL.title, title],
      [SENTINEL.price, priceCents],
    ]);
    const [row] = await run<ListingRow>(query.text, bind(query, values));
    return row && listingView(row, true);
  };

  return {
    meta,
    async page(limit, cursor) {
      const query = cursor === undefined ? queries.pageFirst : queries.pageAfter;
      const rows = await run<ListingRow>(
        query.text,
        bind(
          query,
          new Map<unknown, unknown>([
            [SENTINEL.cursor, cursor],
            [25, limit + 1],
          ]),
        ),
      );
      const page = rows.slice(0, limit);
      return {
        data: page.map((row) => listingView(row, false)),
        meta: meta({
          next_cursor: rows.length > limit ? page[page.length - 1]!.published_at : null,
          count: page.length,
        }),
      };
    },
    async byId(id) {
      const [row] = await run<ListingRow>(
        queries.byId.text,
        bind(queries.byId, new Map([[SENTINEL.id, id]])),
      );
      return row && listingView(row, false);
    },
    async insert(items) {
      const rows = await insertRows(items.map(newListing));
      rows.sort((a, b) => a.ord - b.ord);
      return rows.map((row) => ({ id: row.id, view: listingView(row, true) }));
    },
    update: (id, title, priceCents) => updateRow(queries.update, id, title, priceCents),
    updateOnly: (id, title, priceCents) => updateRow(queries.updateOnly, id, title, priceCents),
    async lookup(externalId) {
      const values = new Map([[SENTINEL.externalIds, JSON.stringify([externalId])]]);
      const [row] = await run<ListingRow>(queries.lookup.text, bind(queries.lookup, values));
      return row && listingView(row, true);
    },
    async keyApp(key) {
      const [row] = await sql<{ app_id: string }[]>`
        select k.app_id from api_keys k join apps a on a.id = k.app_id
        where k.key_hash = ${hashSecret(key)}
          and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())
          and a.deleted_at is null`;
      return row?.app_id;
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

function newListing(body: ListingCreate): NewListing {
  return {
    title: body.title,
    description: body.description ?? null,
    category: body.category ?? null,
    condition: body.condition ?? null,
    brand: body.brand ?? null,
    size: body.size ?? null,
    color: body.color ?? null,
    price_cents: body.price_cents ?? Math.round((body.price_dollars ?? 0) * 100),
    currency: body.currency ?? 'usd',
    impact_mode: body.impact_mode ?? false,
    cover_image_url: body.cover_image_url ?? null,
    image_urls: body.image_urls ?? [],
    tags: body.tags ?? [],
    status: body.status ?? 'draft',
    external_id: body.external_id ?? null,
  };
}
