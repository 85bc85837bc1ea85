/**
 * An app's request logs: every /api/v1 request made with its keys or its users' tokens in the
 * last 14 days (request-logs/request-logs-plugin.ts records them off the request's path), per
 * environment, filtered by status class, method, path prefix and credential, newest first; and one
 * request's page: the error sent with its details, the rate-limit state, the request id to quote to
 * support, and the request's and the response's JSON bodies as kept (their first 8 KB,
 * redacted). The filters are a GET form and the pages links: no JavaScript needed.
 */
import type { FastifyInstance } from 'fastify';
import type { Environment } from '../generated/schemas.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import {
  OAUTH_CREDENTIAL,
  type BodyView,
  type LogPage,
  type LogQuery,
  type RequestLogDetailView,
  type RequestLogView,
} from '../request-logs/request-logs-service.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { ago, appPage, envSwitch, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';

const METHODS = ['GET', 'POST', 'PATCH', 'DELETE'];
/** The status filter's choices: the classes, and the usage chart's outcomes. */
const STATUSES: readonly (readonly [string, string])[] = [
  ['2xx', '2xx'],
  ['3xx', '3xx'],
  ['4xx', '4xx'],
  ['4xx-not-429', '4xx except 429'],
  ['429', '429'],
  ['5xx', '5xx'],
];

type Filters = Omit<LogQuery, 'limit'>;

function link(appId: string, filters: Filters): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
  return `${paths.logs(appId)}?${query.toString()}`;
}

function credentialOf(row: RequestLogView): SafeHtml {
  if (row.key_id)
    return html`${row.key_name || 'Untitled key'} <code>${row.key_prefix ?? ''}…</code>`;
  return html`OAuth token of @${row.username ?? 'unknown'}`;
}

function statusOf(row: RequestLogView): SafeHtml {
  const kind = row.status >= 500 ? 'bad' : row.status >= 400 ? 'wait' : 'ok';
  return html`<span class="status-${kind}">${row.status}</span>`;
}

function select(
  id: string,
  name: string,
  label: string,
  current: string | undefined,
  options: readonly (readonly [string, string])[],
): SafeHtml {
  return html`<span class="field"><label for="${id}">${label}</label>
<select id="${id}" name="${name}">
<option value="">All</option>
${options.map(([value, text]) => html`<option value="${value}"${value === current ? html` selected` : ''}>${text}</option>`)}
</select></span>`;
}

/** The chart's hour or day, kept by the form and shown with a way out. */
function periodFilter(ctx: AppContext, filters: Filters): SafeHtml {
  // Only a well-formed hour or day is described (a malformed one is refused above the form).
  const hour = /^\d{4}-\d{2}-\d{2}T\d{2}:00/.test(filters.hour ?? '') ? filters.hour : undefined;
  const day = /^\d{4}-\d{2}-\d{2}$/.test(filters.day ?? '') ? filters.day : undefined;
  const period = hour
    ? `${hour.slice(0, 10)}, ${hour.slice(11, 13)}:00-${String((Number(hour.slice(11, 13)) + 1) % 24).padStart(2, '0')}:00 UTC`
    : day
      ? `${day} (UTC)`
      : null;
  if (!period) return html``;
  return html`<p class="period-filter" role="note">Only requests of ${period}. <a href="${link(ctx.app.id, { ...filters, hour: undefined, day: undefined, cursor: undefined })}">Show all 14 days</a></p>`;
}

function filterForm(ctx: AppContext, keys: ApiKeyRow[], filters: Filters): SafeHtml {
  // Sandbox or live; the other filters but the credential are kept.
  const envLink = (env: Environment) =>
    link(ctx.app.id, { ...filters, env, credential: undefined, cursor: undefined });
  return html`${envSwitch(filters.env ?? 'sandbox', envLink)}
<form class="filter" method="get" action="${paths.logs(ctx.app.id)}">
<input type="hidden" name="env" value="${filters.env ?? 'sandbox'}">
${select('log-status', 'status', 'Status', filters.status, STATUSES)}
${select(
  'log-method',
  'method',
  'Method',
  filters.method,
  METHODS.map((m) => [m, m] as const),
)}
<span class="field"><label for="log-path">Path</label>
<input type="text" id="log-path" name="path" value="${filters.path ?? ''}" placeholder="/api/v1/listings" maxlength="200" spellcheck="false" aria-describedby="log-path-hint"><span id="log-path-hint" class="visually-hidden">Requests whose path starts with this</span></span>
${select('log-credential', 'credential', 'Credential', filters.credential, [
  ...keys.map((k) => [k.id, `${k.name || 'Untitled key'} (${k.prefix}…)`] as const),
  [OAUTH_CREDENTIAL, 'OAuth tokens'] as const,
])}
${filters.hour ? html`<input type="hidden" name="hour" value="${filters.hour}">` : ''}${filters.day ? html`<input type="hidden" name="day" value="${filters.day}">` : ''}
<button type="submit">Show</button>
</form>
${periodFilter(ctx, filters)}`;
}

/**
 * What the table holds: the total when it is the whole list; "showing N" when there are pages
 * (the log is not counted: the page is what was read).
 */
function logCaption(page: LogPage, older: boolean): string {
  const n = page.items.length;
  const requests = `${n} ${page.environment} request${n === 1 ? '' : 's'}`;
  if (older) return `Showing ${requests}, an older page`;
  if (page.next_cursor) return `Showing the newest ${requests}; older ones on the next pages`;
  return requests;
}

function logsBody(ctx: AppContext, keys: ApiKeyRow[], filters: Filters, page: LogPage): SafeHtml {
  const now = Date.now();
  return html`<p>The last 14 days of <code>/api/v1</code> requests made with this app's keys and its users' OAuth tokens, with their JSON bodies' first 8 KB (secrets, passwords and tokens redacted) on each request's page; no credentials. Newest first; a request shows up within a second or two.</p>
${filterForm(ctx, keys, filters)}
${
  page.dropped
    ? html`<p class="warning" role="note">${page.dropped.dropped} request${page.dropped.dropped === 1 ? ' was' : 's were'} not logged because the log's buffer was full (the last ${when(page.dropped.last_dropped_at)}). The requests themselves were answered as usual.</p>`
    : ''
}
${
  page.items.length === 0
    ? html`<p class="empty">${filters.cursor ? 'No older requests.' : `No ${page.environment} requests match.`}</p>`
    : html`<div class="table-wrap"><table class="log-table">
<caption>${logCaption(page, filters.cursor !== undefined)}</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Method</th><th scope="col">Path</th><th scope="col">Status</th><th scope="col">Error</th><th scope="col">Latency</th><th scope="col">Credential</th></tr></thead>
<tbody>
${page.items.map(
  (row) => html`<tr>
<td class="time"><a href="${paths.log(ctx.app.id, row.id)}">${ago(row.created_at, now)}</a></td>
<td>${row.method}</td>
<td><code class="path">${row.path}</code></td>
<td>${statusOf(row)}</td>
<td>${row.error_code ? html`<code>${row.error_code}</code>` : html`<span class="muted">none</span>`}</td>
<td class="num">${row.latency_ms} ms</td>
<td>${credentialOf(row)}</td>
</tr>`,
)}
</tbody>
</table></div>`
}
<nav class="pager" aria-label="Request log pages">
${filters.cursor ? html`<a href="${link(ctx.app.id, { ...filters, cursor: undefined })}">Newest</a>` : ''}
${page.next_cursor ? html`<a href="${link(ctx.app.id, { ...filters, cursor: page.next_cursor })}" rel="next">Older requests →</a>` : ''}
</nav>`;
}

const kilobytes = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;

/** A body as kept: indented when whole, as cut when not, said so. */
function bodySection(id: string, title: string, body: BodyView | null): SafeHtml {
  let shown = body?.text ?? '';
  if (body && !body.cut) {
    try {
      shown = JSON.stringify(JSON.parse(body.text), null, 2);
    } catch {
      // Shown as kept.
    }
  }
  return html`<section class="card" aria-labelledby="${id}">
<h2 id="${id}">${title}</h2>
${
  body
    ? html`<p class="muted">${
        body.cut
          ? html`Cut: the first 8 KB of ${kilobytes(body.size)} are kept.`
          : html`${body.size} bytes`
      }; secrets, passwords and tokens redacted.</p>
<pre class="code body"><code>${shown}</code></pre>`
    : html`<p class="muted">None (no body, or not JSON).</p>`
}
</section>`;
}

function logBody(ctx: AppContext, row: RequestLogDetailView): SafeHtml {
  return html`<p><a href="${link(ctx.app.id, { env: row.environment })}">← All ${row.environment} requests</a></p>
<section class="card" aria-labelledby="log-heading">
<h2 id="log-heading">${row.method} <code class="path">${row.path}</code></h2>
<dl class="facts">
<dt>Request id</dt><dd><code>${row.request_id}</code> <span class="muted">(the x-request-id header: quote it to support)</span></dd>
<dt>Time</dt><dd>${when(row.created_at)}</dd>
<dt>Status</dt><dd>${statusOf(row)}</dd>
<dt>Latency</dt><dd>${row.latency_ms} ms</dd>
<dt>Environment</dt><dd><span class="env env-${row.environment}">${row.environment}</span></dd>
<dt>Credential</dt><dd>${credentialOf(row)}</dd>
<dt>Rate limit</dt><dd>${
    row.rate_limit
      ? html`${row.rate_limit.remaining} of ${row.rate_limit.limit} left, reset in ${row.rate_limit.reset} s`
      : html`<span class="muted">not reported</span>`
  }</dd>
</dl>
</section>
${
  row.error_code
    ? html`<section class="card" aria-labelledby="error-heading">
<h2 id="error-heading">Error <code>${row.error_code}</code></h2>
<p>${row.error_message ?? ''}</p>
${row.error_details ? html`<h3>Details</h3><pre class="code"><code>${JSON.stringify(row.error_details, null, 2)}</code></pre>` : ''}
</section>`
    : ''
}
${bodySection('request-body-heading', 'Request body', row.request_body)}
${bodySection('response-body-heading', 'Response body', row.response_body)}`;
}

export function registerLogsPages(app: FastifyInstance): void {
  const { requestLogs, keys } = app.services;

  app.get<{ Querystring: Record<string, string | undefined> }>(
    `${APP_ROUTE}/logs`,
    { config: { appAction: 'logs.view' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const q = request.query;
      const filters: Filters = {
        env: q.env === 'live' ? 'live' : ('sandbox' satisfies Environment),
        status: q.status || undefined,
        hour: q.hour || undefined,
        day: q.day || undefined,
        method: q.method || undefined,
        path: q.path || undefined,
        credential: q.credential || undefined,
        cursor: q.cursor || undefined,
      };
      const [page, keyRows] = await Promise.all([
        attempt(() => requestLogs.list(ctx.app.id, filters)),
        keys.list(ctx.app.id),
      ]);
      return sendPage(
        reply,
        page.error ? page.error.status : 200,
        appPage(ctx, 'logs', {
          title: 'Request logs',
          error: page.error?.message,
          body: page.error
            ? filterForm(ctx, keyRows, filters)
            : logsBody(ctx, keyRows, filters, page.value),
        }),
      );
    },
  );

  const logPage = { config: { appAction: 'logs.view' } } as const;
  app.get<{ Params: { logId: string } }>(
    `${APP_ROUTE}/logs/:logId`,
    logPage,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const row = await requestLogs.get(ctx.app.id, request.params.logId);
      return sendPage(
        reply,
        200,
        appPage(ctx, 'logs', {
          title: `${row.method} ${row.path}`,
          body: logBody(ctx, row),
        }),
      );
    },
  );
}
