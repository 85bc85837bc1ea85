/**
 * Every handler of the document's operations, gathered in one map. Operations whose
 * capability has not landed yet are listed in PENDING_OPERATIONS: the binder refuses to
 * boot if an operation is neither handled nor pending, or both.
 */
import type { FastifyInstance } from 'fastify';
import { profileHandlers } from './accounts/profile-handlers.ts';
import type { OperationId } from './generated/operations.ts';
import { listingsHandlers } from './listings/listings-handlers.ts';
import { oauthHandlers } from './oauth/oauth-handlers.ts';
import type { Handlers } from './lib/handlers.ts';
import { systemHandlers } from './system/system-handlers.ts';
import { eventsHandlers } from './events/events-handlers.ts';
import { savedSearchesHandlers } from './saved-searches/saved-searches-handlers.ts';
import { endpointsHandlers } from './webhooks/endpoints-handlers.ts';
import { auditHandlers } from './audit/audit-handlers.ts';

export const PENDING_OPERATIONS: readonly OperationId[] = [];

export function allHandlers(app: FastifyInstance): Handlers {
  return {
    ...systemHandlers(app),
    ...profileHandlers(app),
    ...listingsHandlers(app),
    ...oauthHandlers(app),
    ...eventsHandlers(app),
    ...savedSearchesHandlers(app),
    ...endpointsHandlers(app),
    ...auditHandlers(app),
  };
}
