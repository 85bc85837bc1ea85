/**
 * POST /oauth/revoke (RFC 7009): an app signs a user out by revoking its access token.
 * Pipeline: form body -> client authentication -> revoke if issued to this client -> 200 `{}`.
 * The answer never tells whether the token existed (RFC 7009 §2.2).
 */
import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';
import { authenticateClient, NO_STORE, requireFormBody } from './client-auth.ts';
import { oauthErrorHandler } from './oauth-errors.ts';

export function revokeHandlers(app: FastifyInstance): Handlers {
  const { oauth } = app.services;
  return {
    oauthRevoke: {
      errorHandler: oauthErrorHandler,
      handler: async (request, reply) => {
        requireFormBody(request);
        const clientId = await authenticateClient(oauth, request, request.body);
        await oauth.revokeToken(clientId, request.body.token);
        // `{}`, not an empty body: RFC 7009 §2.2 has the client ignore the content, and
        // clients that parse every answer as JSON (simple-oauth2) fail on an empty one.
        return reply.headers(NO_STORE).send({});
      },
    },
  };
}
