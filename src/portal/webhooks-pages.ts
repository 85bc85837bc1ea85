/**
 * An app's webhook endpoints: create (the signing secret is shown once), the state (active, or
 * disabled and why) with the last error and failure time, ping, signing-secret rotation (the new
 * secret shown once; the old one signs too for 24 hours), re-enable after a successful check
 * ping, the event types it receives (enabled_events: chosen at creation, changed with its URL on
 * its page), deletion, and recent deliveries with redeliver. EndpointsService
 * decides everything (https only, no internal hosts, live only for approved apps), scoped to
 * this app so another app's endpoint or delivery is not found.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CreatedEndpoint, RotatedSecret } from '../webhooks/endpoints-service.ts';
import { asForm, field } from '../web/forms.ts';
import { sendPage } from '../web/html.ts';
import { credentialsAction } from '../access.ts';
import {
  appContext,
  attempt,
  audited,
  permit,
  type AppContext,
  type FormError,
} from './context.ts';
import { appPage, noticeFor } from './layout.ts';
import {
  endpointBody,
  ENDPOINT_NOTICES,
  LIST_NOTICES,
  listenSection,
  sentEvents,
  webhooksBody,
} from './webhooks-html.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';

/**
 * Redeliver, from the endpoint's page or an event's page (as `admin webhook redeliver` does):
 * the delivery is looked up in this app only; done, `page` says so.
 */
export function redeliver(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  {
    page,
    refused,
  }: { page: (appId: string) => string; refused: (error: FormError) => Promise<unknown> },
): Promise<unknown> {
  const ctx = appContext(app, request, reply);
  const deliveryId = field(asForm(request.body), 'delivery_id') ?? '';
  return postThenRedirect(reply, {
    run: () => app.services.endpoints.redeliver(deliveryId, { appId: ctx.app.id }),
    refused,
    done: () => `${page(ctx.app.id)}?done=redelivered`,
  });
}

export function registerWebhooksPages(app: FastifyInstance): void {
  const { endpoints, keys } = app.services;

  const showList = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: {
      created?: CreatedEndpoint;
      form?: { env: string; url: string; events: string[] | undefined };
      error?: string;
      notice?: string | undefined;
    },
  ) => {
    const ctx = appContext(app, request, reply);
    const [listed, appKeys] = await Promise.all([
      endpoints.list(ctx.app.id),
      keys.list(ctx.app.id),
    ]);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'webhooks', {
        title: 'Webhooks',
        error: view.error,
        notice: view.notice,
        body: webhooksBody(ctx, listed, view, listenSection(app.config.baseUrl, appKeys)),
      }),
    );
  };

  const showEndpoint = async (
    request: FastifyRequest<{ Params: { endpointId: string } }>,
    reply: FastifyReply,
    status: number,
    view: {
      error?: string;
      notice?: string | undefined;
      rotated?: RotatedSecret;
      sent?: { url: string; events: string[] | undefined };
    },
  ) => {
    const ctx = appContext(app, request, reply);
    const scope = { appId: ctx.app.id };
    const endpoint = await endpoints.details(request.params.endpointId, scope);
    const { deliveries } = await endpoints.recentDeliveries(endpoint.id, 20, scope);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'webhooks', {
        title: 'Webhook endpoint',
        error: view.error,
        notice: view.notice,
        body: endpointBody(ctx, endpoint, deliveries, view.rotated, view.sent),
      }),
    );
  };

  const view = { config: { appAction: 'app.view' } } as const;
  /** A change of endpoints: a developer's for sandbox ones; each form checks the environment. */
  const change = { config: { formBody: true, appAction: 'sandbox.credentials' } } as const;
  /** 403 unless the user's role may change this endpoint (of this app; another's not found). */
  const permitEndpoint = async (ctx: AppContext, endpointId: string) =>
    permit(
      ctx,
      credentialsAction((await endpoints.details(endpointId, { appId: ctx.app.id })).env),
    );

  app.get<{ Querystring: { done?: string } }>(
    `${APP_ROUTE}/webhooks`,
    view,
    async (request, reply) =>
      showList(request, reply, 200, { notice: noticeFor(LIST_NOTICES, request.query.done) }),
  );

  /** The signing secret is in this response only. */
  app.post(`${APP_ROUTE}/webhooks`, change, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = {
      env: field(form, 'env') ?? '',
      url: field(form, 'url')?.trim() ?? '',
      events: sentEvents(form),
    };
    const created = await attempt(async () => {
      permit(ctx, credentialsAction(sent.env));
      // The URL's DNS before the change's unit of work (EndpointsService.planCreate).
      const create = await endpoints.planCreate({
        appId: ctx.app.id,
        env: sent.env,
        url: sent.url,
        enabledEvents: sent.events,
        by: { via: 'portal', userId: ctx.user.id },
      });
      return audited(app, request, ctx.user, ctx.app.id, create, (e) => ({
        action: 'endpoint.created',
        target: e.id,
        details: { environment: sent.env, url: sent.url, enabled_events: sent.events },
      }));
    });
    if (created.error)
      return showList(request, reply, created.error.status, {
        form: sent,
        error: created.error.message,
      });
    request.log.info(
      { event: 'webhook_endpoint_created', appId: ctx.app.id, endpointId: created.value.id },
      'webhook endpoint created',
    );
    return showList(request, reply, 201, { created: created.value });
  });

  app.get<{ Params: { endpointId: string }; Querystring: { done?: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId`,
    view,
    async (request, reply) =>
      showEndpoint(request, reply, 200, {
        notice: noticeFor(ENDPOINT_NOTICES, request.query.done),
      }),
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/ping`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: async () => {
          await permitEndpoint(ctx, request.params.endpointId);
          return endpoints.ping(request.params.endpointId, { appId: ctx.app.id });
        },
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
        done: () => `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=pinged`,
      });
    },
  );

  /** To this endpoint only: the endpoint's own environment decides (live is refused). */
  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/test-event`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const { endpointId } = request.params;
      return postThenRedirect(reply, {
        run: async () => {
          const endpoint = await endpoints.details(endpointId, { appId: ctx.app.id });
          permit(ctx, credentialsAction(endpoint.env));
          return endpoints.sendTestEvent(
            { appId: ctx.app.id, environment: endpoint.env },
            field(asForm(request.body), 'type') ?? '',
            endpoint.id,
          );
        },
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
        done: () => `${paths.endpoint(ctx.app.id, endpointId)}?done=tested`,
      });
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/redeliver`,
    { config: { formBody: true, appAction: 'events.redeliver' } },
    async (request, reply) =>
      redeliver(app, request, reply, {
        page: (appId) => paths.endpoint(appId, request.params.endpointId),
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
      }),
  );

  /** The new secret is in this response only. */
  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/secret`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const rotated = await attempt(async () => {
        await permitEndpoint(ctx, request.params.endpointId);
        return audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () => endpoints.rotateSecret(request.params.endpointId, { appId: ctx.app.id }),
          () => ({ action: 'endpoint.secret_rotated', target: request.params.endpointId }),
        );
      });
      if (rotated.error)
        return showEndpoint(request, reply, rotated.error.status, { error: rotated.error.message });
      request.log.info(
        { event: 'webhook_secret_rotated', appId: ctx.app.id, endpointId: rotated.value.id },
        'webhook signing secret rotated',
      );
      return showEndpoint(request, reply, 201, { rotated: rotated.value });
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/disable`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: async () => {
          await permitEndpoint(ctx, request.params.endpointId);
          return audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => endpoints.disable(request.params.endpointId, { appId: ctx.app.id }),
            () => ({ action: 'endpoint.disabled', target: request.params.endpointId }),
          );
        },
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
        done: () => `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=disabled`,
      });
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/edit`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const form = asForm(request.body);
      const sent = { url: field(form, 'url')?.trim() ?? '', events: sentEvents(form) };
      return postThenRedirect(reply, {
        run: async () => {
          await permitEndpoint(ctx, request.params.endpointId);
          const update = await endpoints.planUpdate(
            request.params.endpointId,
            { url: sent.url, enabledEvents: sent.events },
            { appId: ctx.app.id },
          );
          return audited(app, request, ctx.user, ctx.app.id, update, () => ({
            action: 'endpoint.updated',
            target: request.params.endpointId,
            details: { url: sent.url, enabled_events: sent.events },
          }));
        },
        refused: (error) =>
          showEndpoint(request, reply, error.status, { error: error.message, sent }),
        done: () => `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=updated`,
      });
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/delete`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: async () => {
          await permitEndpoint(ctx, request.params.endpointId);
          return audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => endpoints.delete(request.params.endpointId, { appId: ctx.app.id }),
            () => ({ action: 'endpoint.deleted', target: request.params.endpointId }),
          );
        },
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
        done: () => `${paths.webhooks(ctx.app.id)}?done=deleted`,
      });
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/enable`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: async () => {
          await permitEndpoint(ctx, request.params.endpointId);
          // The check ping before the change's unit of work (EndpointsService.planEnable).
          const enable = await endpoints.planEnable(request.params.endpointId, {
            appId: ctx.app.id,
          });
          return audited(app, request, ctx.user, ctx.app.id, enable, () => ({
            action: 'endpoint.enabled',
            target: request.params.endpointId,
          }));
        },
        refused: (error) => showEndpoint(request, reply, error.status, { error: error.message }),
        done: () => `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=enabled`,
      });
    },
  );
}
