/**
 * The OAuth 2.0 authorization server's plugin: svc_oauth_ access tokens as API credentials
 * (beside API keys, with the same scope rules), and the pages that are not operations of the
 * document: the form posts of /oauth/authorize and the authorized-apps page. The operations
 * themselves (metadata, authorize, token, userinfo, revoke) are bound by src/routes.ts.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PREFIX } from '../lib/secrets.ts';
import { registerAuthorizeFormRoute } from './authorize.ts';
import { registerAccountAppsRoutes } from './account-apps.ts';

export default fp(
  async function oauth(app: FastifyInstance) {
    const { oauth } = app.services;
    app.addCredentialResolver(PREFIX.accessToken, (credential) =>
      oauth.resolveAccessToken(credential),
    );
    registerAuthorizeFormRoute(app);
    registerAccountAppsRoutes(app);
  },
  { name: 'oauth', fastify: '5.x', dependencies: ['auth', 'services', 'web'] },
);
