/**
 * The peer the API is compared with (issue #18): what a team would write with the other common
 * stack, Express 5 + express-openapi-validator + postgres.js, serving GET /api/v1/listings,
 * GET /api/v1/listings/{id} and POST /api/v1/listings from the same document (requests validated
 * against it, as the validator's users configure it), the same SQL and the same JSON
 * (bare-listings.ts). POST takes a Bearer API key, looked up by its hash as the app does. Not
 * done here, and done by the API: rate limiting, metrics, the request log, response validation.
 *
 * Env: DATABASE_URL, PORT (0: any), BENCH_SELLER_ID, BENCH_APP_ID, BENCH_POOL (10).
 * Prints one JSON line {"port": N} when listening.
 */
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { ListingCreate } from '../../src/generated/schemas.ts';
import { servedDocument } from '../../src/system/openapi-document.ts';
import { openBareListings } from './bare-listings.ts';

const listings = await openBareListings(process.env);
const document = JSON.parse(await servedDocument('http://127.0.0.1').json()) as object;

const app = express();
// Express adds a weak ETag (a hash of every body) by default; the API sends none yet.
app.set('etag', false);
app.disable('x-powered-by');
app.use(express.json({ limit: '1mb' }));
app.use(
  OpenApiValidator.middleware({
    apiSpec: document as never,
    validateRequests: true,
    validateResponses: false,
    // The key is checked by the route below (its hash looked up), not by the validator.
    validateSecurity: false,
  }),
);

app.get('/api/v1/listings', async (req, res) => {
  const query = req.query as { limit?: number; cursor?: string };
  res.json(await listings.page(query.limit ?? 24, query.cursor));
});

app.get('/api/v1/listings/:id', async (req, res) => {
  const listing = await listings.byId(req.params.id!);
  if (!listing) {
    res.status(404).json({ error: { code: 'not_found', message: 'No such listing.' } });
    return;
  }
  res.json({ data: listing, meta: listings.meta() });
});

app.post('/api/v1/listings', async (req, res) => {
  const key = /^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1];
  if (!key || !(await listings.keyApp(key))) {
    res.status(401).json({ error: { code: 'unauthorized', message: 'A valid API key.' } });
    return;
  }
  const [row] = await listings.insert([req.body as ListingCreate]);
  res
    .status(201)
    .location(`/api/v1/listings/${row!.id}`)
    .json({ data: row!.view, meta: listings.meta({}, 'sandbox') });
});

app.use(
  (
    err: { status?: number; message?: string },
    _req: Request,
    res: Response,
    _next: NextFunction,
  ) => {
    res
      .status(err.status ?? 500)
      .json({ error: { code: 'validation_failed', message: err.message ?? 'error' } });
  },
);

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
const stop = () => {
  server.close(() => {
    listings.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
