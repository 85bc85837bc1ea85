import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';

export function eventsHandlers(app: FastifyInstance): Handlers {
  const { events } = app.services;
  return {
    listEvents: async (request) => {
      const { items, nextCursor } = await events.list(request.caller, {
        limit: request.query.limit ?? 24,
        cursor: request.query.cursor,
        type: request.query.type,
      });
      return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
    },
  };
}
