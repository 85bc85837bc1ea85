/**
 * One definition of a search (issue #56): for every parameter of the listListings operation, as
 * the generated operation lists them (so a parameter added to the document is tested without an
 * edit here), the search gate runs a page in a place exactly when the read service answers it
 * with a search rather than the plain feed (docs/operations.md "Fair share": any parameter but
 * `limit`, `cursor` and `sort=newest` makes a search). Through the real listListings handler and
 * the real read service, over stand-in repositories that record which statement would run; no
 * database.
 */
import type { TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import type { Caller } from '../../src/access.ts';
import { ReadRouting } from '../../src/db/replica.ts';
import { operations } from '../../src/generated/operations.ts';
import { listingsHandlers } from '../../src/listings/listings-handlers.ts';
import {
  isSearch,
  ListingsReadService,
  type ListingReadSource,
  type ListQuery,
} from '../../src/listings/listings-read-service.ts';

const PARAMETERS = operations.listListings.schema.querystring.properties as Record<string, TSchema>;

/** A seller's API key with every listings scope: seller=me and status are its to use. */
const SELLER: Caller = {
  kind: 'api_key',
  environment: 'live',
  userId: '0190a5a0-0000-7000-8000-000000000001',
  appId: '0190a5a0-0000-7000-8000-000000000002',
  appOwnerId: '0190a5a0-0000-7000-8000-000000000001',
  credentialId: '0190a5a0-0000-7000-8000-000000000003',
  scopes: ['read', 'listings:write'],
};

/** Valid values of a parameter, from its schema: each enum value, else one of its type. */
function samples(name: string, schema: TSchema): unknown[] {
  if (schema.enum) return schema.enum as unknown[];
  if (name === 'cursor') return ['2026-01-01T00:00:00.000Z'];
  if (name === 'seller') return ['me', 'some_seller'];
  switch (schema.type) {
    case 'array':
      return samples(name, schema.items as TSchema).map((value) => [value]);
    case 'integer':
      return [schema.minimum ?? 1];
    case 'boolean':
      return [true, false];
    case 'string':
      return [schema.format === 'date-time' ? '2026-01-01T00:00:00.000Z' : 'wool'];
    default:
      return [];
  }
}

/**
 * What a value needs beside it to be a valid query (planSearch's rules across parameters), so
 * that the read service reaches a statement instead of refusing the query.
 */
function companions(name: string, value: unknown): ListQuery {
  if (name === 'status') return { seller: 'me' };
  if (name === 'updated_since') return { sort: 'updated_at' };
  if (name === 'sort' && value === 'relevance') return { q: 'wool' };
  return {};
}

/** Runs GET /listings with `query` through the handler; says which statement ran, and gated. */
async function answer(query: ListQuery): Promise<{ ran: string[]; gated: boolean }> {
  const ran: string[] = [];
  const source = {
    listings: {
      page: async () => (ran.push('feed'), []),
      pageVersions: async () => (ran.push('feed versions'), []),
    },
    search: { page: async () => (ran.push('search'), { rows: [], rowsRead: 0, via: 'walk' }) },
  } as unknown as ListingReadSource;
  const listingReads = new ListingsReadService(new ReadRouting(source));
  let gated = false;
  const app = {
    services: { listingReads },
    searchGate: {
      run: async (_request: unknown, work: () => unknown) => ((gated = true), await work()),
    },
  } as unknown as FastifyInstance;
  const reply = {
    header: () => reply,
    code: () => reply,
    send: () => reply,
    chargeRateLimit: async () => undefined,
  };
  const request = { query, headers: {}, caller: SELLER, meta: () => ({}) };
  const handler = listingsHandlers(app).listListings as (...args: unknown[]) => Promise<unknown>;
  await handler.call(app, request, reply);
  return { ran, gated };
}

t.test('every parameter of listListings has values to test', async (t) => {
  for (const [name, schema] of Object.entries(PARAMETERS))
    t.ok(samples(name, schema).length > 0, `${name}: a sample value from its schema`);
});

t.test('the gate and the read service agree on every parameter', async (t) => {
  let searches = 0;
  for (const [name, schema] of Object.entries(PARAMETERS)) {
    for (const value of samples(name, schema)) {
      const query = { ...companions(name, value), [name]: value } as ListQuery;
      const label = new URLSearchParams(query as Record<string, string>).toString();
      const { ran, gated } = await answer(query);
      t.same(ran, [gated ? 'search' : 'feed'], `${label}: gated only if it is a search`);
      t.equal(isSearch(query), gated, `${label}: isSearch says the same`);
      const pageOnly = name === 'limit' || name === 'cursor' || value === 'newest';
      t.equal(gated, !pageOnly, `${label}: ${pageOnly ? 'the plain feed' : 'a search'}`);
      if (gated) searches += 1;
    }
  }
  t.ok(searches > Object.keys(PARAMETERS).length, 'searches were among them');
});

t.test('no parameter at all is the plain feed, not gated', async (t) => {
  t.same(await answer({}), { ran: ['feed'], gated: false });
});
