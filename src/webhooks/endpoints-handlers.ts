/**
 * /api/v1/webhook_endpoints: an app's endpoints managed with one of its API keys (scope
 * webhooks:write; the document's security lets no other credential through), in the key's
 * environment. Every rule is EndpointsService's, as for the portal and the admin CLI. Every
 * change is in the app's audit log with the key as its actor (recordByKey), never the secret.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../access.ts';
import type { Environment } from '../generated/schemas.ts';
import type { Handlers } from '../lib/handlers.ts';
import { recordByKey } from '../audit/audit-handlers.ts';

/** The key's app and environment: the only endpoints it sees. */
function appScope(caller: Caller): { appId: string; environment: Environment } {
  // The operations' security takes API keys only, and every key belongs to an app.
  if (caller.appId === null) throw new Error('webhook endpoints: a caller without an app');
  return { appId: caller.appId, environment: caller.environment };
}

const scopeOf = (request: FastifyRequest) => appScope(request.caller);

/** 204: no body (the document's response has no content, so no schema to type it by). */
const noContent = (reply: FastifyReply): FastifyReply => reply.code(204).send();

const sameEvents = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((e) => b.includes(e));

export function endpointsHandlers(app: FastifyInstance): Handlers {
  const endpoints = app.services.webhooks;
  return {
    createTestEvent: async (request, reply) => {
      const scope = scopeOf(request);
      const sent = await endpoints.sendTestEvent(
        scope,
        request.body.type,
        request.body.endpoint_id,
      );
      // The event as GET /api/v1/events lists it.
      const { event } = await app.services.events.detail(sent.event_id, { appId: scope.appId });
      reply.code(201);
      return { data: { event, deliveries: sent.deliveries }, meta: request.meta() };
    },
    createWebhookEndpoint: async (request, reply) => {
      const scope = scopeOf(request);
      const endpoint = await endpoints.createForApi({
        appId: scope.appId,
        env: scope.environment,
        url: request.body.url,
        enabledEvents: request.body.enabled_events,
      });
      await recordByKey(app, request, scope.appId, {
        action: 'endpoint.created',
        target: endpoint.id,
        details: {
          environment: endpoint.environment,
          url: endpoint.url,
          enabled_events: endpoint.enabled_events,
        },
      });
      reply.code(201).header('location', `/api/v1/webhook_endpoints/${endpoint.id}`);
      return { data: endpoint, meta: request.meta() };
    },
    listWebhookEndpoints: async (request) => {
      const { items, nextCursor } = await endpoints.page(scopeOf(request), {
        limit: request.query.limit ?? 24,
        cursor: request.query.cursor,
      });
      return { data: items, meta: request.meta({ next_cursor: nextCursor, count: items.length }) };
    },
    getWebhookEndpoint: async (request) => ({
      data: await endpoints.getForApi(request.params.id, scopeOf(request)),
      meta: request.meta(),
    }),
    updateWebhookEndpoint: async (request) => {
      const scope = scopeOf(request);
      const { id } = request.params;
      const before = await endpoints.getForApi(id, scope);
      const { url, enabled_events: enabledEvents, disabled } = request.body;
      // The fields change one after the other (url, events, then the state): a refused
      // re-enable leaves the url and events changed, and recorded.
      const record = async (after: typeof before) => {
        if (after.url !== before.url || !sameEvents(after.enabled_events, before.enabled_events))
          await recordByKey(app, request, scope.appId, {
            action: 'endpoint.updated',
            target: id,
            details: {
              environment: after.environment,
              url: after.url,
              enabled_events: after.enabled_events,
            },
          });
        if (after.disabled !== before.disabled)
          await recordByKey(app, request, scope.appId, {
            action: after.disabled ? 'endpoint.disabled' : 'endpoint.enabled',
            target: id,
            details: { environment: after.environment, url: after.url },
          });
      };
      let after: typeof before;
      try {
        after = await endpoints.updateForApi(id, { url, enabledEvents, disabled }, scope);
      } catch (err) {
        await record(await endpoints.getForApi(id, scope));
        throw err;
      }
      await record(after);
      return { data: after, meta: request.meta() };
    },
    deleteWebhookEndpoint: async (request, reply) => {
      const scope = scopeOf(request);
      const { id } = await endpoints.delete(request.params.id, scope);
      await recordByKey(app, request, scope.appId, {
        action: 'endpoint.deleted',
        target: id,
        details: { environment: scope.environment },
      });
      return noContent(reply);
    },
  };
}
