/**
 * POST /oauth/token (RFC 6749 §4.1.3 and §6, RFC 7636 §4.5): the authorization code grant and
 * the refresh token grant. Pipeline: form body -> client authentication -> grant type ->
 * parameters -> exchange (code checks and PKCE in OAuthService.exchangeCode; rotation and reuse
 * detection in OAuthService.refresh) -> token response. Every failure, schema validation
 * included, answers RFC 6749 §5.2 JSON through oauthErrorHandler.
 */
import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';
import { authenticateClient, NO_STORE, requireFormBody } from './client-auth.ts';
import {
  InvalidRequestError,
  oauthErrorHandler,
  UnsupportedGrantTypeError,
} from './oauth-errors.ts';
import type { CodeExchange, IssuedTokens, OAuthService, RefreshRequest } from './oauth-service.ts';
import { formatScopes, parseScopeParameter } from './scopes.ts';

const GRANT_TYPES = ['authorization_code', 'refresh_token'] as const;
type GrantType = (typeof GRANT_TYPES)[number];

interface TokenParams {
  grant_type: string;
  code?: string;
  redirect_uri?: string;
  code_verifier?: string;
  refresh_token?: string;
  scope?: string;
}

function checkGrantType(grantType: string): asserts grantType is GrantType {
  if (!(GRANT_TYPES as readonly string[]).includes(grantType)) {
    throw new UnsupportedGrantTypeError(`Only ${GRANT_TYPES.join(' and ')} are supported.`);
  }
}

function codeExchangeParams(clientId: string, params: TokenParams): CodeExchange {
  if (!params.code) throw new InvalidRequestError('The parameter code is missing.');
  if (!params.redirect_uri) throw new InvalidRequestError('The parameter redirect_uri is missing.');
  return {
    clientId,
    code: params.code,
    redirectUri: params.redirect_uri,
    codeVerifier: params.code_verifier,
  };
}

function refreshParams(clientId: string, params: TokenParams): RefreshRequest {
  if (!params.refresh_token)
    throw new InvalidRequestError('The parameter refresh_token is missing.');
  // Without `scope`, the new access token has all of the authorization's scopes (RFC 6749 §6).
  const scopes = params.scope === undefined ? undefined : parseScopeParameter(params.scope);
  return { clientId, refreshToken: params.refresh_token, scopes };
}

function grant(
  oauth: OAuthService,
  grantType: GrantType,
  clientId: string,
  params: TokenParams,
): Promise<IssuedTokens> {
  return grantType === 'refresh_token'
    ? oauth.refresh(refreshParams(clientId, params))
    : oauth.exchangeCode(codeExchangeParams(clientId, params));
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
        const issued = await grant(oauth, params.grant_type, clientId, params);
        return reply.headers(NO_STORE).send({
          access_token: issued.accessToken,
          token_type: 'Bearer',
          expires_in: issued.expiresIn,
          scope: formatScopes(issued.scopes),
          refresh_token: issued.refreshToken,
        });
      },
    },
  };
}
