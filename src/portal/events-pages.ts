/**
 * An app's events per environment: the same events GET /api/v1/events gives the app's keys
 * (EventsService.forApp), newest first, 20 a page, each with its delivery per endpoint; and one
 * event's page: its data, every delivery with its attempts (time, answer or error, duration),
 * the next retry of a pending one, and redeliver (EndpointsService.redeliver, as the endpoint's
 * page and `admin webhook redeliver` do). Filters and pages are links: no JavaScript needed.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Environment, Event } from '../generated/schemas.ts';
import type { EventDeliveryRow, EventDetail } from '../events/events-service.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { appPage, envSwitch, noticeFor, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { redeliverForm } from './webhooks-html.ts';
import { redeliver } from './webhooks-pages.ts';

const EVENTS_PAGE_SIZE = 20;
const NOTICES = {
  redelivered: 'The delivery was scheduled again, with the same delivery id.',
} as const;

function listLink(appId: string, env: Environment, cursor?: string): string {
  const query = new URLSearchParams({ env });
  if (cursor) query.set('cursor', cursor);
  return `${paths.events(appId)}?${query.toString()}`;
}

function listingOf(event: Event): string | undefined {
  const data = event.data as { listing?: { id?: string } };
  return data.listing?.id;
}

function statusBadge(d: Pick<EventDeliveryRow, 'status'>): SafeHtml {
  return html`<span class="delivery-${d.status}">${d.status}</span>`;
}

function answerOf(code: number | null, error: string | null): SafeHtml {
  if (code !== null) return html`${code}${error ? html` <span class="muted">${error}</span>` : ''}`;
  return error ? html`${error}` : html`<span class="muted">none</span>`;
}

function eventsBody(
  ctx: AppContext,
  env: Environment,
  page: { items: Event[]; nextCursor: string | null; deliveries: EventDeliveryRow[] },
  cursor: string | undefined,
): SafeHtml {
  return html`<p>The ${env} events of this app's listings in the last 30 days, as <code>GET /api/v1/events</code> lists them to its keys, with their deliveries to your endpoints.</p>
${envSwitch(env, (e) => listLink(ctx.app.id, e))}
${
  page.items.length === 0
    ? html`<p class="empty">${cursor ? 'No older events.' : `No ${env} events yet. Changes to listings made with this app's ${env} credentials appear here.`}</p>`
    : html`<div class="table-wrap"><table>
<caption>${page.items.length} ${env} event${page.items.length === 1 ? '' : 's'}${cursor ? ', older page' : ''}</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Type</th><th scope="col">Listing</th><th scope="col">Deliveries</th></tr></thead>
<tbody>
${page.items.map((event) => {
  const deliveries = page.deliveries.filter((d) => d.event_id === event.id);
  const listing = listingOf(event);
  return html`<tr>
<td><a href="${paths.event(ctx.app.id, event.id)}">${when(event.created_at)}</a></td>
<td><a href="${paths.event(ctx.app.id, event.id)}">${event.type}</a></td>
<td>${listing ? html`<code class="small-id">${listing}</code>` : html`<span class="muted">none</span>`}</td>
<td>${
    deliveries.length === 0
      ? html`<span class="muted">no endpoint</span>`
      : html`<ul class="plain">${deliveries.map((d) => html`<li>${statusBadge(d)} ${d.url}</li>`)}</ul>`
  }</td>
</tr>`;
})}
</tbody>
</table></div>`
}
<nav class="pager" aria-label="Event pages">
${cursor ? html`<a href="${listLink(ctx.app.id, env)}">Newest</a>` : ''}
${page.nextCursor ? html`<a href="${listLink(ctx.app.id, env, page.nextCursor)}" rel="next">Older events →</a>` : ''}
</nav>`;
}

function deliverySection(
  ctx: AppContext,
  detail: EventDetail,
  d: EventDetail['deliveries'][number],
): SafeHtml {
  const headingId = `delivery-${d.id}`;
  return html`<section class="card" aria-labelledby="${headingId}">
<h3 id="${headingId}">${d.url}</h3>
<dl class="facts">
<dt>Delivery id</dt><dd><code>${d.id}</code></dd>
<dt>Status</dt><dd>${statusBadge(d)}${d.endpoint_active ? '' : html` <span class="muted">(endpoint disabled)</span>`}</dd>
<dt>Next retry</dt><dd>${d.status === 'pending' ? when(d.next_attempt_at, 'now') : html`<span class="muted">none</span>`}</dd>
<dt>Last answer</dt><dd>${answerOf(d.last_response_code, d.last_error)}</dd>
</dl>
${
  d.attempts_made.length === 0
    ? html`<p class="muted">No attempt yet.</p>`
    : html`<div class="table-wrap"><table>
<caption>Attempts</caption>
<thead><tr><th scope="col">#</th><th scope="col">Time</th><th scope="col">Answer</th><th scope="col">Duration</th></tr></thead>
<tbody>
${d.attempts_made.map(
  (a) => html`<tr>
<td class="num">${a.attempt}</td>
<td>${when(a.attempted_at)}</td>
<td>${answerOf(a.response_code, a.error)}</td>
<td class="num">${a.duration_ms} ms</td>
</tr>`,
)}
</tbody>
</table></div>`
}
${
  d.status === 'pending' || !d.endpoint_active
    ? ''
    : redeliverForm(
        ctx,
        paths.eventRedeliver(ctx.app.id, detail.event.id),
        d.id,
        `Redeliver to ${d.url}`,
      )
}
</section>`;
}

function eventBody(ctx: AppContext, detail: EventDetail): SafeHtml {
  const { event } = detail;
  return html`<p><a href="${listLink(ctx.app.id, detail.environment)}">← All ${detail.environment} events</a></p>
<section class="card" aria-labelledby="event-heading">
<h2 id="event-heading">${event.type}</h2>
<dl class="facts">
<dt>Event id</dt><dd><code>${event.id}</code></dd>
<dt>Environment</dt><dd><span class="env env-${detail.environment}">${detail.environment}</span></dd>
<dt>Created</dt><dd>${when(event.created_at)}</dd>
</dl>
<details>
<summary>Data</summary>
<pre class="code"><code>${JSON.stringify(event.data, null, 2)}</code></pre>
</details>
</section>
<section aria-labelledby="deliveries-heading">
<h2 id="deliveries-heading">Deliveries</h2>
${
  detail.deliveries.length === 0
    ? html`<p>No endpoint was active for this event's environment when it happened.</p>`
    : detail.deliveries.map((d) => deliverySection(ctx, detail, d))
}
</section>`;
}

export function registerEventsPages(app: FastifyInstance): void {
  const { events } = app.services;

  const showEvent = async (
    request: FastifyRequest<{ Params: { eventId: string } }>,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const detail = await events.detail(request.params.eventId, { appId: ctx.app.id });
    return sendPage(
      reply,
      status,
      appPage(ctx, 'events', {
        title: `Event ${detail.event.type}`,
        error: view.error,
        notice: view.notice,
        body: eventBody(ctx, detail),
      }),
    );
  };

  app.get<{ Querystring: { env?: string; cursor?: string } }>(
    `${APP_ROUTE}/events`,
    { config: { appAction: 'events.view' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const env: Environment = request.query.env === 'live' ? 'live' : 'sandbox';
      const cursor = request.query.cursor || undefined;
      const page = await attempt(() =>
        events.forApp(ctx.app.id, env, { limit: EVENTS_PAGE_SIZE, cursor }),
      );
      const body = page.error ? html`` : eventsBody(ctx, env, page.value, cursor);
      return sendPage(
        reply,
        page.error ? page.error.status : 200,
        appPage(ctx, 'events', { title: 'Events', error: page.error?.message, body }),
      );
    },
  );

  app.get<{ Params: { eventId: string }; Querystring: { done?: string } }>(
    `${APP_ROUTE}/events/:eventId`,
    { config: { appAction: 'events.view' } },
    async (request, reply) =>
      showEvent(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post<{ Params: { eventId: string } }>(
    `${APP_ROUTE}/events/:eventId/redeliver`,
    { config: { formBody: true, appAction: 'events.redeliver' } },
    async (request, reply) =>
      redeliver(app, request, reply, {
        page: (appId) => paths.event(appId, request.params.eventId),
        refused: (error) => showEvent(request, reply, error.status, { error: error.message }),
      }),
  );
}
