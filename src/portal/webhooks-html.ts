/**
 * The webhooks pages' HTML (webhooks-pages.ts has their routes): the app's endpoints with the
 * form that adds one and the listen command, one endpoint's page with its actions and recent
 * deliveries, and the notices either shows after a form.
 */
import type { DeliveryView, EndpointDetails } from '../webhooks/endpoint-views.ts';
import {
  MAX_ACTIVE_ENDPOINTS,
  type CreatedEndpoint,
  type RotatedSecret,
} from '../webhooks/endpoints-service.ts';
import { ENABLED_EVENT_TYPE_VALUES } from '../generated/constants.ts';
import { field, fieldValues, type FormBody } from '../web/forms.ts';
import { html, type SafeHtml } from '../web/html.ts';
import type { AppContext } from './context.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import { codeBlock, csrfInput, secretOnce, when } from './layout.ts';
import { paths } from './paths.ts';
import { TEST_EVENT_TYPES } from '../webhooks/test-events.ts';
import { LISTEN_KEY_VARIABLE, listenCommand } from './snippets.ts';

export const ENDPOINT_NOTICES = {
  pinged: 'Ping sent. Its delivery is at the top of the list below (reload to see its outcome).',
  tested:
    'Test event sent to this endpoint. Its delivery is at the top of the list below (reload to see its outcome).',
  redelivered: 'The delivery was scheduled again, with the same delivery id.',
  enabled: 'The check ping was answered, and the endpoint is enabled again.',
  disabled: 'The endpoint is disabled: nothing more is sent to it until you re-enable it.',
  updated: 'The endpoint was updated. Events recorded from now on follow its new settings.',
} as const;

export const LIST_NOTICES = {
  deleted:
    'The endpoint was deleted: nothing more is sent to it, and its pending deliveries failed.',
} as const;

/** Each choice of enabled_events in plain words (`*` first: every type, today's and later). */
const EVENT_WORDS: Record<(typeof ENABLED_EVENT_TYPE_VALUES)[number], string> = {
  '*': 'Every event type (including types added later)',
  'listing.created': 'listing.created: a listing was created',
  'listing.updated': 'listing.updated: a listing was changed',
  'listing.archived': 'listing.archived: a listing was archived',
  'listing.matched': 'listing.matched: a listing matched a saved search',
};

/** What the endpoint receives, in a list. */
function eventsSummary(events: readonly string[]): SafeHtml {
  return events.includes('*')
    ? html`every event type`
    : html`${events.map((type, i) => html`${i > 0 ? ', ' : ''}<code>${type}</code>`)}`;
}

/**
 * The event checkboxes of the create and edit forms: one fieldset, each box labelled. Pings reach
 * the endpoint whatever is ticked.
 */
function eventsFieldset(idPrefix: string, checked: readonly string[]): SafeHtml {
  return html`<fieldset aria-describedby="${idPrefix}-events-hint">
<legend>Events to send</legend>
<input type="hidden" name="events_shown" value="1">
<p class="hint" id="${idPrefix}-events-hint">Tick "Every event type", or the types this endpoint handles. Pings always reach it.</p>
${ENABLED_EVENT_TYPE_VALUES.map(
  (type) =>
    html`<label class="choice"><input type="checkbox" name="events" value="${type}"${checked.includes(type) ? html` checked` : ''}> ${EVENT_WORDS[type]}</label>`,
)}
</fieldset>`;
}

/**
 * The ticked event types as the form sent them: none ticked is none (the service refuses it); a
 * post without the fieldset (a script, an older page) leaves them to the default or as they are.
 */
export const sentEvents = (form: FormBody): string[] | undefined =>
  field(form, 'events_shown') === undefined ? undefined : fieldValues(form, 'events');

/** The receiver's side of a rotation, as docs/webhooks.md says it. */
const ROTATION_WORDS =
  "Until then both secrets sign every delivery: webhook-signature carries one v1 entry per secret, and X-Service-Signature stays on the previous secret. Put the new secret in your receiver (the SDK's verifyWebhook takes both: [newSecret, oldSecret]) before the old one stops.";

function activeFlag(endpoint: EndpointDetails): SafeHtml {
  return endpoint.active
    ? html`<span class="status-ok">Active</span>`
    : html`<span class="status-bad">Disabled</span> <span class="muted">(${endpoint.disabled_reason ?? ''})</span>`;
}

function lastFailure(endpoint: EndpointDetails): SafeHtml {
  if (!endpoint.last_failure_at && !endpoint.last_error)
    return html`<span class="muted">none</span>`;
  return html`${endpoint.last_error ?? ''}<br>${when(endpoint.last_failure_at)}`;
}

function pingForm(ctx: AppContext, endpoint: EndpointDetails): SafeHtml {
  if (!endpoint.active) return html``;
  return html`<form method="post" action="${paths.endpointPing(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit" class="small" aria-label="Send a ping to ${endpoint.url}">Ping</button>
</form>`;
}

/**
 * "Send test event" (POST /api/v1/events/test with this endpoint's id): a sandbox event of a
 * type the endpoint enabled, to this endpoint only. Live endpoints get none (sandbox only).
 */
function testEventForm(ctx: AppContext, endpoint: EndpointDetails): SafeHtml {
  if (!endpoint.active) return html``;
  if (endpoint.env !== 'sandbox')
    return html`<p class="hint">Test events are sandbox only: a live endpoint receives real events alone.</p>`;
  const types = TEST_EVENT_TYPES.filter(
    (type) => endpoint.enabled_events.includes('*') || endpoint.enabled_events.includes(type),
  );
  if (types.length === 0) return html``;
  return html`<form method="post" action="${paths.endpointTestEvent(ctx.app.id, endpoint.id)}" class="inline-form">
${csrfInput(ctx.csrfToken)}
<label for="test-event-type">Test event</label>
<select id="test-event-type" name="type">
${types.map((type) => html`<option value="${type}">${type}</option>`)}
</select>
<button type="submit" class="small">Send test event</button>
<p class="hint">A sample event, marked <code>"test": true</code> in its data, to this endpoint only (signed and retried as any). <code>marketplace-listings-sdk trigger</code> sends one to every endpoint that enabled the type.</p>
</form>`;
}

/** The app's keys that work now, in one environment. */
const workingKeys = (keys: ApiKeyRow[], env: 'sandbox' | 'live', now: Date) =>
  keys.filter((k) => k.environment === env && !k.revokedAt && (!k.expiresAt || k.expiresAt > now));

/**
 * The SDK's `listen` command, per environment the app has a working key in (sandbox always),
 * filled in with this server's URL, and the keys to put in its environment variable.
 */
export function listenSection(baseUrl: string, keys: ApiKeyRow[]): SafeHtml {
  const now = new Date();
  const envs = (['sandbox', 'live'] as const).filter(
    (env) => env === 'sandbox' || workingKeys(keys, env, now).length > 0,
  );
  return html`<section class="card" aria-labelledby="listen-heading">
<h2 id="listen-heading">Receive events on your machine</h2>
<p>No public URL needed while you develop: the SDK's <code>listen</code> command forwards this app's events to a local receiver as signed deliveries (it registers no endpoint). Run it at the root of a checkout of this API's repository, after <code>npm install</code> (the SDK is not on a registry yet). It prints a signing secret (<code>whsec_…</code>) to verify them with, as an endpoint's. See docs/webhooks.md, "Developing locally".</p>
${envs.map((env) => {
  const usable = workingKeys(keys, env, now);
  return html`<h3>${env === 'sandbox' ? 'Sandbox' : 'Live'}</h3>
<p>Set <code>${LISTEN_KEY_VARIABLE}</code> to ${
    usable.length === 0
      ? html`a ${env} key of this app (create one on the Keys page; it is shown once)`
      : html`one of this app's ${env} keys: ${usable.map(
          (k, i) =>
            html`${i > 0 ? ', ' : ''}${k.name || 'Untitled key'} (<code>${k.prefix}…</code>)`,
        )}`
  }. The key comes from the environment only, never from an argument.</p>
${codeBlock(`listen-${env}`, `${env} listen command`, listenCommand(baseUrl, env))}`;
})}
</section>`;
}

export function webhooksBody(
  ctx: AppContext,
  endpoints: (EndpointDetails & { made_by: string })[],
  view: {
    created?: CreatedEndpoint;
    form?: { env: string; url: string; events: string[] | undefined };
    notice?: string | undefined;
  },
  listen: SafeHtml,
): SafeHtml {
  const env = view.form?.env ?? 'sandbox';
  return html`${
    view.created
      ? secretOnce({
          id: 'webhook-secret',
          heading: 'Your new endpoint signing secret',
          label: `Signing secret of ${view.created.url}`,
          secret: view.created.secret,
          // The one-liners of docs/webhooks.md: as printed for the SDK; without `svc_` for the
          // Standard Webhooks libraries (the one step the svc_ prefix costs).
          stored:
            "Verify every delivery with it: with our SDK as printed, await verifyWebhook(secret, rawBody, headers); with the Standard Webhooks libraries without its svc_, new Webhook(secret.replace(/^svc_/, '')).verify(rawBody, headers) (docs/webhooks.md, Verifying signatures). If you lose it, rotate the secret on this endpoint's page (Rotate signing secret): a new one is shown once, and the lost one keeps signing for 24 hours while you deploy the new one (docs/webhooks.md, Rotating the signing secret).",
        })
      : ''
  }
<section aria-labelledby="endpoints-heading">
<h2 id="endpoints-heading">Endpoints</h2>
${
  endpoints.length === 0
    ? html`<p>No endpoints yet. Listing changes made with this app's credentials are sent to its endpoints in the listing's environment.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">URL</th><th scope="col">Environment</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Made by</th><th scope="col">Last failure</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${endpoints.map(
  (e) => html`<tr>
<td><a href="${paths.endpoint(ctx.app.id, e.id)}">${e.url}</a></td>
<td><span class="env env-${e.env}">${e.env}</span></td>
<td>${eventsSummary(e.enabled_events)}</td>
<td>${activeFlag(e)}</td>
<td>${e.made_by}</td>
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
${eventsFieldset('new-endpoint', view.form?.events ?? ['*'])}
<div class="actions"><button type="submit" class="primary">Add endpoint</button></div>
</form>
</section>
${listen}`;
}

function deliveryRow(ctx: AppContext, endpoint: EndpointDetails, d: DeliveryView): SafeHtml {
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
      : redeliverForm(
          ctx,
          paths.endpointRedeliver(ctx.app.id, endpoint.id),
          d.id,
          `Redeliver ${d.id}`,
        )
  }</td>
</tr>`;
}

/** Redeliver one delivery (the endpoint's page, an event's page); `label`: its accessible name. */
export function redeliverForm(
  ctx: AppContext,
  action: string,
  deliveryId: string,
  label: string,
): SafeHtml {
  return html`<form method="post" action="${action}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="delivery_id" value="${deliveryId}">
<button type="submit" class="small" aria-label="${label}">Redeliver</button>
</form>`;
}

function rotatedBox(rotated: RotatedSecret): SafeHtml {
  return secretOnce({
    id: 'webhook-secret',
    heading: 'Your new endpoint signing secret',
    label: 'New signing secret',
    secret: rotated.secret,
    stored: 'Verify deliveries with it, as printed.',
    after: html`<p>The previous secret keeps signing until ${when(rotated.previous_secret_expires_at)}. ${ROTATION_WORDS}</p>`,
  });
}

/** Rotate (any endpoint) and, for a disabled one, re-enable after a check ping. */
function endpointActions(ctx: AppContext, endpoint: EndpointDetails): SafeHtml {
  const rotate = html`<section class="card" aria-labelledby="rotate-heading">
<h2 id="rotate-heading">Signing secret</h2>
${
  endpoint.previous_secret_expires_at
    ? html`<p>Rotated: the previous secret also signs until ${when(endpoint.previous_secret_expires_at)}. Rotating again now replaces that previous secret at once.</p>`
    : html`<p>Rotating makes a new secret, shown once. The current one keeps signing for 24 hours, so your receiver can switch without missing a delivery.</p>`
}
<form method="post" action="${paths.endpointRotate(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit">Rotate signing secret</button>
</form>
</section>`;
  if (endpoint.active)
    return html`${rotate}<section class="card" aria-labelledby="disable-heading">
<h2 id="disable-heading">Disable</h2>
<p>Nothing is sent to a disabled endpoint, and its pending deliveries fail; you can re-enable it later with a check ping. An app may have ${MAX_ACTIVE_ENDPOINTS} active endpoints per environment.</p>
<form method="post" action="${paths.endpointDisable(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit">Disable endpoint</button>
</form>
</section>`;
  return html`<section class="card" aria-labelledby="enable-heading">
<h2 id="enable-heading">Re-enable</h2>
<p>Disabled ${when(endpoint.disabled_at, '')}: ${endpoint.disabled_reason ?? ''} Once it answers again, re-enable it: we send a check ping now, and only a 2xx answer enables it. Deliveries that failed meanwhile can be redelivered below.</p>
<form method="post" action="${paths.endpointEnable(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit" class="primary">Ping and re-enable</button>
</form>
</section>
${rotate}`;
}

/** Change the URL and the event types; the form as sent is shown again after a refusal. */
function editForm(
  ctx: AppContext,
  endpoint: EndpointDetails,
  sent: { url: string; events: string[] | undefined } | undefined,
): SafeHtml {
  return html`<section class="card" aria-labelledby="edit-heading">
<h2 id="edit-heading">Settings</h2>
<form method="post" action="${paths.endpointEdit(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<label for="edit-endpoint-url">URL</label>
<p class="hint" id="edit-endpoint-url-hint">https only; hosts on internal networks are refused. The signing secret stays the same.</p>
<input type="url" id="edit-endpoint-url" name="url" value="${sent?.url ?? endpoint.url}" required maxlength="2048" autocomplete="off" spellcheck="false" aria-describedby="edit-endpoint-url-hint">
${eventsFieldset('edit-endpoint', sent?.events ?? endpoint.enabled_events)}
<div class="actions"><button type="submit" class="primary">Save settings</button></div>
</form>
</section>`;
}

function deleteForm(ctx: AppContext, endpoint: EndpointDetails): SafeHtml {
  return html`<section class="card" aria-labelledby="delete-heading">
<h2 id="delete-heading">Delete</h2>
<p>Deleting stops every delivery to this endpoint for good: its pending deliveries fail now, and it cannot be re-enabled. Past deliveries stay listed on the Events pages.</p>
<form method="post" action="${paths.endpointDelete(ctx.app.id, endpoint.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit" class="danger" aria-label="Delete endpoint ${endpoint.url}">Delete endpoint</button>
</form>
</section>`;
}

export function endpointBody(
  ctx: AppContext,
  endpoint: EndpointDetails,
  deliveries: DeliveryView[],
  rotated?: RotatedSecret,
  sent?: { url: string; events: string[] | undefined },
): SafeHtml {
  return html`${rotated ? rotatedBox(rotated) : ''}<p><a href="${paths.webhooks(ctx.app.id)}">← All endpoints</a></p>
<section class="card" aria-labelledby="endpoint-heading">
<h2 id="endpoint-heading">Endpoint</h2>
<dl class="facts">
<dt>URL</dt><dd><code>${endpoint.url}</code></dd>
<dt>Id</dt><dd><code>${endpoint.id}</code></dd>
<dt>Environment</dt><dd><span class="env env-${endpoint.env}">${endpoint.env}</span></dd>
<dt>Events</dt><dd>${eventsSummary(endpoint.enabled_events)}</dd>
<dt>State</dt><dd>${activeFlag(endpoint)}</dd>
<dt>Last error</dt><dd>${endpoint.last_error ?? html`<span class="muted">none</span>`}</dd>
<dt>Last failure</dt><dd>${when(endpoint.last_failure_at, 'none')}</dd>
</dl>
${pingForm(ctx, endpoint)}
${testEventForm(ctx, endpoint)}
</section>
${editForm(ctx, endpoint, sent)}
${endpointActions(ctx, endpoint)}
${deleteForm(ctx, endpoint)}
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
