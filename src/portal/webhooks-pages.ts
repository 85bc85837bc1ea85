/**
 * An app's webhook endpoints: create (the signing secret is shown once), the active flag with
 * the last error and failure time, ping, and recent deliveries with redeliver. EndpointsService
 * decides everything (https only, no internal hosts, live only for approved apps), scoped to
 * this app so another app's endpoint or delivery is not found.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CreatedEndpoint, DeliveryView, EndpointView } from '../webhooks/endpoints-service.ts';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { appPage, csrfInput, noticeFor, secretOnce, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';

const ENDPOINT_NOTICES = {
  pinged: 'Ping sent. Its delivery is at the top of the list below (reload to see its outcome).',
  redelivered: 'The delivery was scheduled again, with the same delivery id.',
} as const;

function activeFlag(endpoint: EndpointView): SafeHtml {
  return endpoint.active
    ? html`<span class="status-ok">Active</span>`
    : html`<span class="status-bad">Disabled</span> <span class="muted">(it answered 410 Gone)</span>`;
}

function lastFailure(endpoint: EndpointView): SafeHtml {
  if (!endpoint.last_failure_at && !endpoint.last_error)
    return html`<span class="muted">none</span>`;
  return html`${endpoint.last_error ?? ''}<br>${when(endpoint.last_failure_at)}`;
}

function pingForm(ctx: AppContext, endpoint: EndpointView): SafeHtml {
  if (!endpoint.active) return html``;
  return html`<form method="post" action="${paths.endpointPing(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit" class="small" aria-label="Send a ping to ${endpoint.url}">Ping</button>
</form>`;
}

function webhooksBody(
  ctx: AppContext,
  endpoints: EndpointView[],
  view: { created?: CreatedEndpoint; form?: { env: string; url: string } },
): SafeHtml {
  const env = view.form?.env ?? 'sandbox';
  return html`${
    view.created
      ? secretOnce({
          id: 'webhook-secret',
          heading: 'Your new endpoint signing secret',
          label: `Signing secret of ${view.created.url}`,
          secret: view.created.secret,
          // The one-liners of docs/webhooks.md: the secret works as printed, not as base64.
          stored:
            "Verify every delivery with it, as printed: with our SDK, await verifyWebhook(secret, rawBody, headers); with the Standard Webhooks libraries, new Webhook(secret, { format: 'raw' }) (docs/webhooks.md, Verifying signatures). If you lose it, create a new endpoint.",
        })
      : ''
  }
<section aria-labelledby="endpoints-heading">
<h2 id="endpoints-heading">Endpoints</h2>
${
  endpoints.length === 0
    ? html`<p>No endpoints yet. Listing changes made with this app's credentials are sent to its endpoints in the listing's environment.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">URL</th><th scope="col">Environment</th><th scope="col">State</th><th scope="col">Last failure</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${endpoints.map(
  (e) => html`<tr>
<td><a href="${paths.endpoint(ctx.app.id, e.id)}">${e.url}</a></td>
<td><span class="env env-${e.env}">${e.env}</span></td>
<td>${activeFlag(e)}</td>
<td>${lastFailure(e)}</td>
<td><div class="row-actions">${pingForm(ctx, e)}<a href="${paths.endpoint(ctx.app.id, e.id)}">Deliveries</a></div></td>
</tr>`,
)}
</tbody>
</table></div>`
}
</section>
<section class="card" aria-labelledby="new-endpoint-heading">
<h2 id="new-endpoint-heading">Add an endpoint</h2>
<form method="post" action="${paths.webhooks(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<fieldset>
<legend>Environment</legend>
<label class="choice"><input type="radio" name="env" value="sandbox"${env === 'sandbox' ? html` checked` : ''}> Sandbox</label>
<label class="choice"><input type="radio" name="env" value="live"${env === 'live' ? html` checked` : ''}> Live <span class="muted">(needs production approval)</span></label>
</fieldset>
<label for="endpoint-url">URL</label>
<p class="hint" id="endpoint-url-hint">https only; hosts on internal networks are refused.</p>
<input type="url" id="endpoint-url" name="url" value="${view.form?.url ?? ''}" required maxlength="2048" placeholder="https://example.com/webhooks" autocomplete="off" spellcheck="false" aria-describedby="endpoint-url-hint">
<div class="actions"><button type="submit" class="primary">Add endpoint</button></div>
</form>
</section>`;
}

function deliveryRow(ctx: AppContext, endpoint: EndpointView, d: DeliveryView): SafeHtml {
  return html`<tr>
<td><code>${d.id}</code></td>
<td>${d.type}</td>
<td><span class="delivery-${d.status}">${d.status}</span>${d.status === 'pending' && d.next_attempt_at ? html`<br><span class="muted">next ${when(d.next_attempt_at)}</span>` : ''}</td>
<td>${d.attempts}</td>
<td>${d.last_response_code ?? html`<span class="muted">none</span>`}${d.last_error ? html`<br>${d.last_error}` : ''}</td>
<td>${when(d.last_attempt_at)}</td>
<td>${
    d.status === 'pending' || !endpoint.active
      ? ''
      : html`<form method="post" action="${paths.endpointRedeliver(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="delivery_id" value="${d.id}">
<button type="submit" class="small" aria-label="Redeliver ${d.id}">Redeliver</button>
</form>`
  }</td>
</tr>`;
}

function endpointBody(
  ctx: AppContext,
  endpoint: EndpointView,
  deliveries: DeliveryView[],
): SafeHtml {
  return html`<p><a href="${paths.webhooks(ctx.app.id)}">← All endpoints</a></p>
<section class="card" aria-labelledby="endpoint-heading">
<h2 id="endpoint-heading">Endpoint</h2>
<dl class="facts">
<dt>URL</dt><dd><code>${endpoint.url}</code></dd>
<dt>Id</dt><dd><code>${endpoint.id}</code></dd>
<dt>Environment</dt><dd><span class="env env-${endpoint.env}">${endpoint.env}</span></dd>
<dt>State</dt><dd>${activeFlag(endpoint)}</dd>
<dt>Last error</dt><dd>${endpoint.last_error ?? html`<span class="muted">none</span>`}</dd>
<dt>Last failure</dt><dd>${when(endpoint.last_failure_at, 'none')}</dd>
</dl>
${pingForm(ctx, endpoint)}
</section>
<section aria-labelledby="deliveries-heading">
<h2 id="deliveries-heading">Recent deliveries</h2>
${
  deliveries.length === 0
    ? html`<p>No deliveries yet. Send a ping to try the endpoint.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Delivery id</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Last attempt</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${deliveries.map((d) => deliveryRow(ctx, endpoint, d))}
</tbody>
</table></div>`
}
</section>`;
}

export function registerWebhooksPages(app: FastifyInstance): void {
  const { webhooks } = app.services;

  const showList = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { created?: CreatedEndpoint; form?: { env: string; url: string }; error?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const endpoints = await webhooks.list(ctx.app.id);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'webhooks', {
        title: 'Webhooks',
        error: view.error,
        body: webhooksBody(ctx, endpoints, view),
      }),
    );
  };

  const showEndpoint = async (
    request: FastifyRequest<{ Params: { endpointId: string } }>,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const scope = { appId: ctx.app.id };
    const endpoint = await webhooks.show(request.params.endpointId, scope);
    const { deliveries } = await webhooks.recentDeliveries(endpoint.id, 20, scope);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'webhooks', {
        title: 'Webhook endpoint',
        ...view,
        body: endpointBody(ctx, endpoint, deliveries),
      }),
    );
  };

  app.get(`${APP_ROUTE}/webhooks`, async (request, reply) => showList(request, reply, 200, {}));

  /** The signing secret is in this response only. */
  app.post(`${APP_ROUTE}/webhooks`, { config: { formBody: true } }, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = { env: field(form, 'env') ?? '', url: field(form, 'url')?.trim() ?? '' };
    const created = await attempt(() =>
      webhooks.create({ appId: ctx.app.id, env: sent.env, url: sent.url }),
    );
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
    async (request, reply) =>
      showEndpoint(request, reply, 200, {
        notice: noticeFor(ENDPOINT_NOTICES, request.query.done),
      }),
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/ping`,
    { config: { formBody: true } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const pinged = await attempt(() =>
        webhooks.ping(request.params.endpointId, { appId: ctx.app.id }),
      );
      if (pinged.error)
        return showEndpoint(request, reply, pinged.error.status, { error: pinged.error.message });
      return reply.redirect(
        `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=pinged`,
        303,
      );
    },
  );

  app.post<{ Params: { endpointId: string } }>(
    `${APP_ROUTE}/webhooks/:endpointId/redeliver`,
    { config: { formBody: true } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const deliveryId = field(asForm(request.body), 'delivery_id') ?? '';
      const redelivered = await attempt(() =>
        webhooks.redeliver(deliveryId, { appId: ctx.app.id }),
      );
      if (redelivered.error)
        return showEndpoint(request, reply, redelivered.error.status, {
          error: redelivered.error.message,
        });
      return reply.redirect(
        `${paths.endpoint(ctx.app.id, request.params.endpointId)}?done=redelivered`,
        303,
      );
    },
  );
}
