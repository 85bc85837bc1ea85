import type { FastifyInstance } from 'fastify';
import { UnauthorizedError } from '../errors.ts';
import type { Handlers } from '../lib/handlers.ts';

export function profileHandlers(app: FastifyInstance): Handlers {
  const { users } = app.services;
  return {
    getMe: async (request) => {
      const userId = request.caller.userId;
      if (!userId) throw new UnauthorizedError('This endpoint needs a credential.');
      const user = await users.getById(userId);
      return { data: await users.privateProfile(user), meta: request.meta() };
    },
    getProfile: async (request) => {
      const user = await users.getByUsername(request.params.username);
      return { data: await users.profile(user), meta: request.meta() };
    },
  };
}
