/**
 * GET /.well-known/oauth-authorization-server (RFC 8414 §3): built once from BASE_URL, the
 * issuer, with every endpoint an absolute URL under it.
 */
import type { FastifyInstance } from 'fastify';
import type { AuthorizationServerMetadata } from '../generated/schemas.ts';
import type { Handlers } from '../lib/handlers.ts';
import { SCOPES } from '../access.ts';
import { oauthErrorHandler } from './oauth-errors.ts';
import { CODE_CHALLENGE_METHODS } from './pkce.ts';

function authorizationServerMetadata(baseUrl: string): AuthorizationServerMetadata {
  const authMethods: ('client_secret_basic' | 'client_secret_post')[] = [
    'client_secret_basic',
    'client_secret_post',
  ];
  return {
    issuer: baseUrl,
    authorization_endpoint: `${baseUrl}/oauth/authorize`,
    token_endpoint: `${baseUrl}/oauth/token`,
    revocation_endpoint: `${baseUrl}/oauth/revoke`,
    userinfo_endpoint: `${baseUrl}/oauth/userinfo`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_methods_supported: authMethods,
    revocation_endpoint_auth_methods_supported: authMethods,
    code_challenge_methods_supported: [...CODE_CHALLENGE_METHODS],
    service_documentation: `${baseUrl}/docs`,
  };
}

export function metadataHandlers(app: FastifyInstance): Handlers {
  const metadata = authorizationServerMetadata(app.config.baseUrl);
  return {
    getAuthorizationServerMetadata: {
      errorHandler: oauthErrorHandler,
      handler: async (_request, reply) =>
        reply.header('cache-control', 'public, max-age=3600').send(metadata),
    },
  };
}
