import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../plugins/operations.ts';
import { BATCH_MAX } from './listings-service.ts';

export function listingsHandlers(app: FastifyInstance): Handlers {
  const { listings } = app.services;
  return {
    listListings: async (request) => {
      const { items, nextCursor } = await listings.list(request.caller, request.query);
      return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
    },

    getListing: async (request) => ({
      data: await listings.get(request.caller, request.params.id),
      meta: request.meta(),
    }),

    createListing: async (request, reply) => {
      const idempotencyKey = request.headers['idempotency-key'];
      const { listing, created } = await listings.create(
        request.caller,
        request.body,
        idempotencyKey,
      );
      if (created) reply.code(201).header('location', `/api/v1/listings/${listing.id}`);
      return {
        data: listing,
        meta: request.meta(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }),
      };
    },

    batchCreateListings: async (request, reply) => {
      const outcome = await listings.batch(request.caller, request.body.items);
      if (outcome.failed === outcome.results.length) reply.code(422);
      return {
        data: { results: outcome.results },
        meta: request.meta({
          total: outcome.results.length,
          created: outcome.created,
          updated: outcome.updated,
          failed: outcome.failed,
          max_per_request: BATCH_MAX,
        }),
      };
    },

    updateListing: async (request) => ({
      data: await listings.update(request.caller, request.params.id, request.body),
      meta: request.meta(),
    }),

    archiveListing: async (request) => ({
      data: await listings.archive(request.caller, request.params.id),
      meta: request.meta(),
    }),
  };
}
