import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Handler, Handlers } from '../lib/handlers.ts';
import { BATCH_MAX } from './listings-batch-service.ts';
import { matchesAny } from './etags.ts';
import { isSearch } from './listings-read-service.ts';
import { searchCharge } from './search-charge.ts';

export function listingsHandlers(app: FastifyInstance): Handlers {
  const { listingWrites, listingBatches, listingReads } = app.services;
  /** A page of GET /listings: the feed's or a search's. */
  const listPage = async (...[request, reply]: Parameters<Handler<'listListings'>>) => {
    const ifNoneMatch = request.headers['if-none-match'];
    if (ifNoneMatch !== undefined) {
      const etag = await listingReads.listUnchanged(request.caller, request.query, ifNoneMatch);
      if (etag) return notModified(request, reply, etag);
    }
    const page = await listingReads.list(request.caller, request.query);
    // A search is charged by the rows it read (search-charge.ts), on this answer's headers.
    if (page.rowsRead !== undefined) await reply.chargeRateLimit(searchCharge(page.rowsRead));
    // A search's one statement answered the page: its ETag decides a 304 (no second run).
    if (ifNoneMatch !== undefined && matchesAny(ifNoneMatch, page.etag))
      return notModified(request, reply, page.etag);
    const { items, nextCursor } = page;
    cacheable(request, reply, page.etag);
    return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
  };
  return {
    listListings: async (request, reply) => {
      // A search runs in a place of the search gate (src/listings/search-gate-plugin.ts), held
      // for the whole of the handler's work, whatever ends it (an answer, an error, a 304).
      if (!isSearch(request.query)) return listPage(request, reply);
      return app.searchGate.run(request, () => listPage(request, reply));
    },

    getListing: async (request, reply) => {
      const ifNoneMatch = request.headers['if-none-match'];
      if (ifNoneMatch !== undefined) {
        const etag = await listingReads.getUnchanged(
          request.caller,
          request.params.id,
          ifNoneMatch,
        );
        if (etag) return notModified(request, reply, etag);
      }
      const read = await listingReads.get(request.caller, request.params.id);
      const { listing } = read;
      cacheable(request, reply, read.etag);
      return { data: listing, meta: request.meta() };
    },

    createListing: async (request, reply) => {
      const idempotencyKey = request.headers['idempotency-key'];
      const { listing, created } = await listingWrites.create(
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
      const outcome = await listingBatches.batch(request.caller, request.body.items);
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
      data: await listingWrites.update(request.caller, request.params.id, request.body),
      meta: request.meta(),
    }),

    archiveListing: async (request) => ({
      data: await listingWrites.archive(request.caller, request.params.id),
      meta: request.meta(),
    }),
  };
}

/**
 * The caching headers of a listing read (the document's "Caching and conditional requests"):
 * anonymous answers are the same for everyone, so shared caches may keep them 5 seconds; answers
 * to a credential are private and revalidated every time.
 */
function cacheable(request: FastifyRequest, reply: FastifyReply, etag: string): void {
  reply
    .header('etag', etag)
    .header(
      'cache-control',
      request.caller.kind === 'anonymous' ? 'public, max-age=5' : 'private, no-cache',
    )
    .header('vary', 'Authorization');
}

/** 304: the same validator and caching headers, no body (nothing is built or serialized). */
function notModified(request: FastifyRequest, reply: FastifyReply, etag: string): FastifyReply {
  cacheable(request, reply, etag);
  return reply.code(304).send();
}
