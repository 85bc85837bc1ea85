/**
 * GET /oauth/userinfo: the authorizing user's profile, with email, in the API envelope, plus a
 * top-level `sub` (the user id): OAuth client libraries read the subject there (OpenID Connect
 * Core 1.0 §5.3.2) and refuse an answer without it.
 * The document's security (oauth2 with scope read) already refused API keys (403) and
 * tokens without read; errors use the envelope like the rest of the API.
 */
import type { FastifyInstance } from 'fastify';
import { UnauthorizedError } from '../errors.ts';
import type { Handlers } from '../lib/handlers.ts';

export function userinfoHandlers(app: FastifyInstance): Handlers {
  const { users } = app.services;
  return {
    oauthUserinfo: async (request) => {
      const userId = request.caller.userId;
      if (request.caller.kind !== 'oauth' || !userId)
        throw new UnauthorizedError('This endpoint needs an OAuth access token.');
      const user = await users.getById(userId);
      return { sub: user.id, data: await users.privateProfile(user), meta: request.meta() };
    },
  };
}
