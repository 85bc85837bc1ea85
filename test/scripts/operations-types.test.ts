// Proves that a generated operation entry gives Fastify's TypeBox type provider what it needs to
// type request and reply. The real proof is `npm run typecheck`: the @ts-expect-error lines fail
// it if inference ever degrades to unknown/any. The fixture output is regenerated and compared
// by generate.test.ts, so it cannot go stale.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import t from 'tap';
import { operations, type OperationId } from './fixtures/generated/operations.ts';
import type { Listing, ListingPage } from './fixtures/generated/schemas.ts';

t.test('generated operations type request and reply through the TypeBox provider', async (t) => {
  const app = Fastify().withTypeProvider<TypeBoxTypeProvider>();
  t.teardown(() => app.close());

  const list = operations.listListings;
  app.route({
    method: list.method,
    url: list.url,
    schema: list.schema,
    handler: async (request) => {
      const limit: number | undefined = request.query.limit;
      const status: 'draft' | 'active' | 'archived' | undefined = request.query.status;
      const environment: 'sandbox' | 'live' = request.headers['x-environment'];
      // @ts-expect-error limit is a number, not a string
      const wrong: string | undefined = request.query.limit;
      void [status, environment, wrong];
      const page: ListingPage = {
        data: [],
        nextCursor: limit === undefined ? null : String(limit),
      };
      return page;
    },
  });

  const create = operations.createListing;
  app.route({
    method: create.method,
    url: create.url,
    schema: create.schema,
    handler: async (request, reply) => {
      const title: string = request.body.title;
      const listing: Listing = {
        ...request.body,
        id: '00000000-0000-4000-8000-000000000000',
        status: 'draft',
        createdAt: new Date(0).toISOString(),
      };
      if (title === 'forbidden') {
        // @ts-expect-error the reply payload must match a documented response schema
        return reply.code(401).send({ nope: true });
      }
      return reply.code(201).send({ ...listing, title });
    },
  });

  const get = operations.getListing;
  app.route({
    method: get.method,
    url: get.url,
    schema: get.schema,
    handler: async (request) => {
      const id: string = request.params.id;
      // @ts-expect-error params has only the documented path parameters
      void request.params.other;
      return { type: 'about:blank', title: `no listing ${id}`, status: 404 };
    },
  });

  const ids: OperationId[] = ['listListings', 'createListing', 'getListing'];
  t.same(
    ids.map((id) => operations[id].operationId),
    ids,
  );

  const response = await app.inject({
    method: 'GET',
    url: '/api/v1/listings?limit=2',
    headers: { 'x-environment': 'sandbox' },
  });
  t.equal(response.statusCode, 200);
  t.same(response.json(), { data: [], nextCursor: '2' });
});
