/**
 * An app's audit log (docs/portal.md, "Audit log"): every sensitive change, newest first, 50 a
 * page (keyset pages: "Older" carries the cursor), filtered by actor (a username, admin_cli or
 * an API key's id) and action. AuditService reads it, as `admin app audit` does.
 */
import type { FastifyInstance } from 'fastify';
import { AUDIT_ACTIONS, type AuditEntry } from '../audit/audit-service.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { appPage, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';

interface Filters {
  actor?: string | undefined;
  action?: string | undefined;
}

function link(appId: string, filters: Filters, cursor?: string): string {
  const query = new URLSearchParams();
  if (filters.actor) query.set('actor', filters.actor);
  if (filters.action) query.set('action', filters.action);
  if (cursor) query.set('cursor', cursor);
  const text = query.toString();
  return text ? `${paths.audit(appId)}?${text}` : paths.audit(appId);
}

function actorOf(entry: AuditEntry): SafeHtml {
  if (entry.actor.type === 'admin_cli') return html`<span class="muted">admin CLI</span>`;
  if (entry.actor.type === 'api_key') return html`API key <code>${entry.actor.id}</code>`;
  return html`@${entry.actor.name}`;
}

function auditBody(
  ctx: AppContext,
  filters: Filters,
  page: { entries: AuditEntry[]; next_cursor: string | null } | undefined,
): SafeHtml {
  return html`<p>Every change of this app's members, credentials, endpoints and settings: who made it, from where, and what changed (never a secret). Newest first.</p>
<form class="filter" method="get" action="${paths.audit(ctx.app.id)}">
<span class="field"><label for="audit-actor">Actor</label>
<input type="text" id="audit-actor" name="actor" value="${filters.actor ?? ''}" placeholder="username, admin_cli or key id" maxlength="100" spellcheck="false"></span>
<span class="field"><label for="audit-action">Action</label>
<select id="audit-action" name="action">
<option value="">Any</option>
${AUDIT_ACTIONS.map((a) => html`<option value="${a}"${a === filters.action ? html` selected` : ''}>${a}</option>`)}
</select></span>
<button type="submit">Show</button>
</form>
${
  !page
    ? ''
    : page.entries.length === 0
      ? html`<p>No entries${filters.actor || filters.action ? ' match these filters' : ' yet'}.</p>`
      : html`<div class="table-wrap"><table>
<caption class="visually-hidden">Audit log</caption>
<thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">What changed</th><th scope="col">From</th></tr></thead>
<tbody>
${page.entries.map(
  (e) => html`<tr>
<td>${when(e.at)}</td>
<td>${actorOf(e)}</td>
<td><code>${e.action}</code></td>
<td>${e.target ? html`<code>${e.target}</code>` : ''}</td>
<td>${Object.keys(e.details).length ? html`<code>${JSON.stringify(e.details)}</code>` : ''}</td>
<td>${e.ip ?? ''}${e.user_agent ? html`<br><span class="muted">${e.user_agent}</span>` : ''}</td>
</tr>`,
)}
</tbody>
</table></div>
${page.next_cursor ? html`<p><a href="${link(ctx.app.id, filters, page.next_cursor)}">Older entries</a></p>` : ''}`
}`;
}

export function registerAuditPages(app: FastifyInstance): void {
  app.get<{ Querystring: { actor?: string; action?: string; cursor?: string } }>(
    `${APP_ROUTE}/audit`,
    { config: { appAction: 'audit.view' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const filters = {
        actor: request.query.actor || undefined,
        action: request.query.action || undefined,
      };
      const page = await attempt(() =>
        app.services.audit.page(ctx.app.id, {
          ...filters,
          cursor: request.query.cursor || undefined,
        }),
      );
      return sendPage(
        reply,
        page.error ? page.error.status : 200,
        appPage(ctx, 'audit', {
          title: 'Audit log',
          error: page.error?.message,
          body: auditBody(ctx, filters, page.value),
        }),
      );
    },
  );
}
