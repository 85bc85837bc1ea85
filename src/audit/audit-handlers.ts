/**
 * GET /api/v1/audit_events (OpenAPI listAuditEvents, "Audit log"): the key's app's audit log,
 * both environments (the log is the app's), read through AuditService like the portal's page
 * and `admin app audit`. The document's security (apiKey, audit:read) lets no other credential
 * through; the scope is checked where every scope is (plugins/auth.ts `authorize`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuditActor, AuditNote } from './audit-service.ts';
import type { Handlers } from '../lib/handlers.ts';

/**
 * The actor of a change made through the API with an API key (its id, the request's client IP
 * and user agent); null for any other caller (an OAuth token acts for a user of the app, not for
 * the app, and its changes are not the app's team's).
 */
function apiKeyActor(request: FastifyRequest): AuditActor | null {
  const { caller } = request;
  if (caller.kind !== 'api_key' || caller.credentialId === null) return null;
  return {
    type: 'api_key',
    keyId: caller.credentialId,
    ip: request.ip,
    userAgent: request.headers['user-agent'] ?? null,
  };
}

/**
 * Makes a change through the API and records it in the app's audit log as the API key's, one
 * unit of work (AuditService.audited, the one recorder): a refusal records nothing, an entry
 * that cannot be written undoes the change. Each door records its own changes (the portal's
 * forms as their user's, the admin CLI as admin_cli), so no change is recorded twice. An OAuth
 * token's changes are not recorded (apiKeyActor). `notes` may be none (nothing changed).
 */
export function auditedByKey<T>(
  app: FastifyInstance,
  request: FastifyRequest,
  appId: string,
  work: () => Promise<T>,
  notes: (value: T) => AuditNote | readonly AuditNote[],
): Promise<T> {
  return app.services.audit.audited(apiKeyActor(request), work, (value) => {
    const made = notes(value);
    return (Array.isArray(made) ? made : [made]).map((note: AuditNote) => ({ appId, ...note }));
  });
}

export function auditHandlers(app: FastifyInstance): Handlers {
  const { audit } = app.services;
  return {
    listAuditEvents: async (request) => {
      // Every API key belongs to an app; the security takes API keys only.
      const { appId } = request.caller;
      if (appId === null) throw new Error('audit events: a caller without an app');
      const { entries, next_cursor } = await audit.page(appId, {
        limit: request.query.limit ?? 50,
        cursor: request.query.cursor,
        actor: request.query.actor,
        action: request.query.action,
      });
      return {
        data: entries,
        meta: request.meta({ next_cursor, count: entries.length }),
      };
    },
  };
}
