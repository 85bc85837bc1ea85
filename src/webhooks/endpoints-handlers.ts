/**
 * /api/v1/webhook_endpoints: an app's endpoints managed with one of its API keys (scope
 * webhooks:write; the document's security lets no other credential through), in the key's
 * environment. Every rule is EndpointsService's, as for the portal and the admin CLI. Every
 * change is in the app's audit log with the key as its actor, in the change's own unit of work
 * (auditedByKey), never the secret; a URL's DNS and a check ping are made before it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../access.ts';
import type { Environment } from '../generated/schemas.ts';
import type { Handlers } from '../lib/handlers.ts';
import { auditedByKey } from '../audit/audit-handlers.ts';

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
  const endpoints = app.services.endpoints;
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
      const create = await endpoints.planCreateForApi({
        appId: scope.appId,
        env: scope.environment,
        url: request.body.url,
        enabledEvents: request.body.enabled_events,
      });
      const endpoint = await auditedByKey(app, request, scope.appId, create, (created) => ({
        action: 'endpoint.created',
        target: created.id,
        details: {
          environment: created.environment,
          url: created.url,
          enabled_events: created.enabled_events,
        },
      }));
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
      // The fields change one after the other (url and events, then the state), each its own
      // unit of work with its entry: a refused re-enable leaves the url and events changed, and
      // recorded.
      let urlNow = before.url;
      if (url !== undefined || enabledEvents !== undefined) {
        const update = await endpoints.planUpdate(id, { url, enabledEvents }, scope);
        ({ url: urlNow } = await auditedByKey(app, request, scope.appId, update, (after) =>
          after.url !== before.url || !sameEvents(after.enabled_events, before.enabled_events)
            ? {
                action: 'endpoint.updated',
                target: id,
                details: {
                  environment: before.environment,
                  url: after.url,
                  enabled_events: after.enabled_events,
                },
              }
            : [],
        ));
      }
      const state = (action: 'endpoint.disabled' | 'endpoint.enabled') => () => ({
        action,
        target: id,
        details: { environment: before.environment, url: urlNow },
      });
      if (disabled === true && !before.disabled)
        await auditedByKey(
          app,
          request,
          scope.appId,
          () => endpoints.disable(id, scope),
          state('endpoint.disabled'),
        );
      if (disabled === false && before.disabled) {
        const enable = await endpoints.planEnable(id, scope);
        await auditedByKey(app, request, scope.appId, enable, state('endpoint.enabled'));
      }
      return { data: await endpoints.getForApi(id, scope), meta: request.meta() };
    },
    deleteWebhookEndpoint: async (request, reply) => {
      const scope = scopeOf(request);
      await auditedByKey(
        app,
        request,
        scope.appId,
        () => endpoints.delete(request.params.id, scope),
        ({ id }) => ({
          action: 'endpoint.deleted',
          target: id,
          details: { environment: scope.environment },
        }),
      );
      return noContent(reply);
    },
  };
}
