import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';
import { auditedByKey } from '../audit/audit-handlers.ts';

export function savedSearchesHandlers(app: FastifyInstance): Handlers {
  const { savedSearches } = app.services;
  return {
    createSavedSearch: async (request, reply) => {
      const saved = await savedSearches.create(request.caller, request.body);
      reply.code(201).header('location', `/api/v1/saved_searches/${saved.id}`);
      return { data: saved, meta: request.meta() };
    },
    listSavedSearches: async (request) => {
      const { items, nextCursor } = await savedSearches.list(request.caller, {
        limit: request.query.limit ?? 24,
        cursor: request.query.cursor,
      });
      return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
    },
    getSavedSearch: async (request) => ({
      data: await savedSearches.get(request.caller, request.params.id),
      meta: request.meta(),
    }),
    deleteSavedSearch: async (request, reply) => {
      const { caller } = request;
      const remove = () => savedSearches.delete(caller, request.params.id);
      // A key's delete is the app's change (its audit log); a user's token deletes their own.
      if (caller.appId === null) await remove();
      else
        await auditedByKey(app, request, caller.appId, remove, () => ({
          action: 'saved_search.deleted',
          target: request.params.id,
          details: { environment: caller.environment },
        }));
      return reply.code(204).send(null);
    },
  };
}
