import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';

export function eventsHandlers(app: FastifyInstance): Handlers {
  const { events } = app.services;
  return {
    listEvents: async (request, reply) => {
      // A long poll ends early when its client goes away (the response closes unanswered).
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      const { items, nextCursor } = await events.list(
        request.caller,
        {
          limit: request.query.limit ?? 24,
          cursor: request.query.cursor,
          type: request.query.type,
          wait: request.query.wait,
        },
        gone.signal,
        // A wait asks again before it answers with data: revoked meanwhile is 401.
        () => app.credentialStillValid(request),
      );
      return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
    },
  };
}
