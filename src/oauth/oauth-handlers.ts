/** The OAuth operations of the document, one file per endpoint, gathered for src/routes.ts. */
import type { FastifyInstance } from 'fastify';
import type { Handlers } from '../lib/handlers.ts';
import { authorizeHandlers } from './authorize.ts';
import { metadataHandlers } from './metadata.ts';
import { revokeHandlers } from './revoke.ts';
import { tokenHandlers } from './token.ts';
import { userinfoHandlers } from './userinfo.ts';

export function oauthHandlers(app: FastifyInstance): Handlers {
  return {
    ...metadataHandlers(app),
    ...authorizeHandlers(app),
    ...tokenHandlers(app),
    ...userinfoHandlers(app),
    ...revokeHandlers(app),
  };
}
