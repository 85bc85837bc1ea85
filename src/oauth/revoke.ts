/**
 * POST /oauth/revoke (RFC 7009): an app signs a user out by revoking its access token.
 * Pipeline: form body -> client authentication -> revoke if issued to this client -> 200.
 * The answer never tells whether the token existed (RFC 7009 §2.2).
 */
import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../plugins/operations.ts';
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
        // 200 with an empty body (the document lists no 200 content, hence the cast).
        return reply.headers(NO_STORE).send(undefined as never);
      },
    },
  };
}
