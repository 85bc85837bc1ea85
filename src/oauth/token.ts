/**
 * POST /oauth/token (RFC 6749 §4.1.3, RFC 7636 §4.5): the authorization code grant.
 * Pipeline: form body -> client authentication -> grant type -> parameters -> exchange
 * (code checks and PKCE in OAuthService.exchangeCode) -> token response. Every failure,
 * schema validation included, answers RFC 6749 §5.2 JSON through oauthErrorHandler.
 */
import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../plugins/operations.ts';
import { authenticateClient, NO_STORE, requireFormBody } from './client-auth.ts';
import { InvalidRequestError, oauthErrorHandler, UnsupportedGrantTypeError } from './oauth-errors.ts';
import type { CodeExchange } from './oauth-service.ts';
import { formatScopes } from './scopes.ts';

/** Grant types served; refresh_token would join here, with its own file. */
const GRANT_TYPES = ['authorization_code'] as const;

interface TokenParams {
  grant_type: string;
  code?: string;
  redirect_uri?: string;
  code_verifier?: string;
}

function checkGrantType(grantType: string): void {
  if (!(GRANT_TYPES as readonly string[]).includes(grantType)) {
    throw new UnsupportedGrantTypeError(`Only ${GRANT_TYPES.join(', ')} is supported.`);
  }
}

function codeExchangeParams(clientId: string, params: TokenParams): CodeExchange {
  if (!params.code) throw new InvalidRequestError('The parameter code is missing.');
  if (!params.redirect_uri) throw new InvalidRequestError('The parameter redirect_uri is missing.');
  return { clientId, code: params.code, redirectUri: params.redirect_uri, codeVerifier: params.code_verifier };
}

export function tokenHandlers(app: FastifyInstance): Handlers {
  const { oauth } = app.services;
  return {
    oauthToken: {
      errorHandler: oauthErrorHandler,
      handler: async (request, reply) => {
        requireFormBody(request);
        const params = request.body;
        const clientId = await authenticateClient(oauth, request, params);
        checkGrantType(params.grant_type);
        const issued = await oauth.exchangeCode(codeExchangeParams(clientId, params));
        return reply.headers(NO_STORE).send({
          access_token: issued.accessToken,
          token_type: 'Bearer',
          expires_in: issued.expiresIn,
          scope: formatScopes(issued.scopes),
        });
      },
    },
  };
}
