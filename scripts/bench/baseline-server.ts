/**
 * The floor and the ceiling the API is measured against, in a process of its own:
 * bare Fastify 5 (no plugins, no hooks, no schemas, no logger) and the same postgres.js
 * driver with the same pool size, running the app's own SQL (captured-sql.ts) and answering
 * the same JSON (the app's listingView and envelope). The API's figures divided by these
 * are what the stack adds: auth, rate limiting, validation, serialization, transactions.
 *
 *   GET  /const            a constant: the framework's ceiling
 *   GET  /listings         the feed query (?cursor= for a deep page)
 *   GET  /listings/:id     the by-id query
 *   POST /listings         the create statement, one item: the INSERT with its webhook event
 *                          and deliveries in CTEs, as ListingsService.create runs it (a bare INSERT
 * route)
 *   PATCH /listings/:id    the update statement
 *   POST /listings/batch   the same statement with the body's items
 *
 * Env: DATABASE_URL, PORT (0: any), BENCH_SELLER_ID, BENCH_APP_ID, BENCH_POOL (10).
 * Prints one JSON line {"port": N} when listening.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import postgres from 'postgres';
import type { ListingCreate, ListingUpdate } from '../../src/generated/schemas.ts';
import type { ListingRow, NewListing } from '../../src/listings/listings-repository.ts';
import { listingView } from '../../src/listings/listings-service.ts';
import { bind, captureListingQueries, SENTINEL } from './captured-sql.ts';

const url = process.env.DATABASE_URL;
const sellerId = process.env.BENCH_SELLER_ID;
const appId = process.env.BENCH_APP_ID;
if (!url || !sellerId || !appId)
  throw new Error('DATABASE_URL, BENCH_SELLER_ID and BENCH_APP_ID are required');

const queries = await captureListingQueries({ sellerId, appId });
const sql = postgres(url, {
  max: Number(process.env.BENCH_POOL ?? 10),
  onnotice: () => {},
  connection: { TimeZone: 'UTC' },
});
// The same type handling as the app's client (drizzle-orm/postgres-js sets these): timestamps
// and dates as text, json/jsonb parameters passed through as the JSON text they already are.
const transparent = (value: unknown) => value;
for (const type of ['1184', '1082', '1083', '1114', '1182', '1185', '1115', '1231']) {
  (sql.options.parsers as Record<string, unknown>)[type] = transparent;
  (sql.options.serializers as Record<string, unknown>)[type] = transparent;
}
(sql.options.serializers as Record<string, unknown>)['114'] = transparent;
(sql.options.serializers as Record<string, unknown>)['3802'] = transparent;
/** postgres.js prepares its statements by default (tagged templates); so does the floor. */
const run = <T>(text: string, params: unknown[]) =>
  sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<T[]>;

const meta = (extra: Record<string, unknown> = {}, environment = 'live') => ({
  version: 'v1',
  environment,
  request_id: `req_${randomUUID().replaceAll('-', '')}`,
  ...extra,
});

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

/** Concurrent inserts can pick the same published_at (unique): retried, as the app does. */
async function insertItems(items: NewListing[]): Promise<(ListingRow & { ord: number })[]> {
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
}

const app = Fastify({ logger: false, genReqId: () => `req_${randomUUID().replaceAll('-', '')}` });

app.get('/const', async () => ({ ok: true }));

app.get<{ Querystring: { cursor?: string; limit?: string } }>('/listings', async (request) => {
  const limit = Number(request.query.limit ?? 24);
  const { cursor } = request.query;
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
});

app.get<{ Params: { id: string } }>('/listings/:id', async (request, reply) => {
  const [row] = await run<ListingRow>(
    queries.byId.text,
    bind(queries.byId, new Map([[SENTINEL.id, request.params.id]])),
  );
  if (!row) return reply.code(404).send({ error: { code: 'not_found' } });
  return { data: listingView(row, false), meta: meta() };
});

app.post<{ Body: ListingCreate }>('/listings', async (request, reply) => {
  const [row] = await insertItems([newListing(request.body)]);
  reply.code(201).header('location', `/api/v1/listings/${row!.id}`);
  return { data: listingView(row!, true), meta: meta({}, 'sandbox') };
});

app.patch<{ Params: { id: string }; Body: ListingUpdate }>('/listings/:id', async (request) => {
  const values = new Map<unknown, unknown>([
    [SENTINEL.id, request.params.id],
    [SENTINEL.title, request.body.title],
    [SENTINEL.price, request.body.price_cents],
  ]);
  const [row] = await run<ListingRow>(queries.update.text, bind(queries.update, values));
  return { data: listingView(row!, true), meta: meta({}, 'sandbox') };
});

app.post<{ Body: { items: ListingCreate[] } }>('/listings/batch', async (request) => {
  const rows = await insertItems(request.body.items.map(newListing));
  rows.sort((a, b) => a.ord - b.ord);
  const results = rows.map((row) => ({
    index: row.ord,
    ok: true,
    status: 201,
    data: listingView(row, true),
  }));
  return {
    data: { results },
    meta: meta(
      { total: results.length, created: results.length, updated: 0, failed: 0 },
      'sandbox',
    ),
  };
});

const stop = () => {
  app
    .close()
    .then(() => sql.end({ timeout: 5 }))
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`,
);
