/**
 * The floor and the ceiling the API is measured against, in a process of its own:
 * bare Fastify 5 (no plugins, no hooks, no schemas, no logger) and the same postgres.js
 * driver with the same pool size, running the app's own SQL and answering the same JSON
 * (bare-listings.ts). The API's figures divided by these are what the stack adds: auth, rate
 * limiting, validation, serialization, transactions.
 *
 *   GET  /const            a constant: the framework's ceiling
 *   GET  /listings         the feed query (?cursor= for a deep page)
 *   GET  /listings/:id     the by-id query
 *   POST /listings         the create statement, one item: the INSERT with what it records
 *                          in CTEs (webhook event and deliveries, match queue, milestone), as
 *                          ListingWritesService.create runs it
 *   PATCH /listings/:id    PATCH's statement: the guarded UPDATE with what it records in CTEs,
 *                          as ListingWritesService.update runs it
 *   PATCH /listings-only/:id  the same UPDATE without the event (what the outbox adds)
 *   POST /replay           a no-op idempotent replay's statement: the external_id lookup of the
 *                          Idempotency-Key, answered 200 with the listing
 *   POST /listings/batch   the same statement with the body's items
 *
 * Env: DATABASE_URL, PORT (0: any), BENCH_SELLER_ID, BENCH_APP_ID, BENCH_POOL (10).
 * Prints one JSON line {"port": N} when listening.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import type { ListingCreate, ListingUpdate } from '../../src/generated/schemas.ts';
import { openBareListings } from './bare-listings.ts';

const listings = await openBareListings(process.env);
const app = Fastify({ logger: false, genReqId: () => `req_${randomUUID().replaceAll('-', '')}` });

app.get('/const', async () => ({ ok: true }));

app.get<{ Querystring: { cursor?: string; limit?: string } }>('/listings', async (request) =>
  listings.page(Number(request.query.limit ?? 24), request.query.cursor),
);

app.get<{ Params: { id: string } }>('/listings/:id', async (request, reply) => {
  const listing = await listings.byId(request.params.id);
  if (!listing) return reply.code(404).send({ error: { code: 'not_found' } });
  return { data: listing, meta: listings.meta() };
});

app.post<{ Body: ListingCreate }>('/listings', async (request, reply) => {
  const [row] = await listings.insert([request.body]);
  reply.code(201).header('location', `/api/v1/listings/${row!.id}`);
  return { data: row!.view, meta: listings.meta({}, 'sandbox') };
});

app.patch<{ Params: { id: string }; Body: ListingUpdate }>('/listings/:id', async (request) => ({
  data: await listings.update(request.params.id, request.body.title, request.body.price_cents),
  meta: listings.meta({}, 'sandbox'),
}));

app.patch<{ Params: { id: string }; Body: ListingUpdate }>(
  '/listings-only/:id',
  async (request) => ({
    data: await listings.updateOnly(
      request.params.id,
      request.body.title,
      request.body.price_cents,
    ),
    meta: listings.meta({}, 'sandbox'),
  }),
);

app.post('/replay', async (request, reply) => {
  const listing = await listings.lookup(String(request.headers['idempotency-key']));
  if (!listing) return reply.code(404).send({ error: { code: 'not_found' } });
  return { data: listing, meta: listings.meta({}, 'sandbox') };
});

app.post<{ Body: { items: ListingCreate[] } }>('/listings/batch', async (request) => {
  const rows = await listings.insert(request.body.items);
  const results = rows.map((row, index) => ({ index, ok: true, status: 201, data: row.view }));
  return {
    data: { results },
    meta: listings.meta(
      { total: results.length, created: results.length, updated: 0, failed: 0 },
      'sandbox',
    ),
  };
});

const stop = () => {
  app
    .close()
    .then(() => listings.close())
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
