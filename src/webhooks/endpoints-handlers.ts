/**
 * /api/v1/webhook_endpoints: an app's endpoints managed with one of its API keys (scope
 * webhooks:write; the document's security lets no other credential through), in the key's
 * environment. Every rule is EndpointsService's, as for the portal and the admin CLI.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../access.ts';
import type { Environment } from '../generated/schemas.ts';
import type { Handlers } from '../lib/handlers.ts';

/** The key's app and environment: the only endpoints it sees. */
function appScope(caller: Caller): { appId: string; environment: Environment } {
  // The operations' security takes API keys only, and every key belongs to an app.
  if (caller.appId === null) throw new Error('webhook endpoints: a caller without an app');
  return { appId: caller.appId, environment: caller.environment };
}

const scopeOf = (request: FastifyRequest) => appScope(request.caller);

/** 204: no body (the document's response has no content, so no schema to type it by). */
const noContent = (reply: FastifyReply): FastifyReply => reply.code(204).send();

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
    updateWebhookEndpoint: async (request) => ({
      data: await endpoints.updateForApi(
        request.params.id,
        {
          url: request.body.url,
          enabledEvents: request.body.enabled_events,
          disabled: request.body.disabled,
        },
        scopeOf(request),
      ),
      meta: request.meta(),
    }),
    deleteWebhookEndpoint: async (request, reply) => {
      await endpoints.delete(request.params.id, scopeOf(request));
      return noContent(reply);
    },
  };
}
