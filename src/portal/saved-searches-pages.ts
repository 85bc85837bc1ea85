/**
 * An app's saved searches per environment (sandbox, live): those its keys and its users' OAuth
 * tokens saved through POST /api/v1/saved_searches, newest first, 50 a page, each with its
 * search in words, when it was made and last matched, and whether a user's token made it; and
 * delete. SavedSearchesService decides everything (SavedSearchesService.forApp and .remove, as
 * `admin saved-search list` and `delete` call them), scoped to this app so another app's saved
 * search is not found.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Environment } from '../generated/schemas.ts';
import type { SavedSearchDetail } from '../saved-searches/saved-searches-service.ts';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, type AppContext, attempt, audited } from './context.ts';
import { appPage, csrfInput, envSwitch, noticeFor, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';

const PAGE_SIZE = 50;
const NOTICES = {
  deleted: 'The saved search was deleted: it matches nothing from now on.',
} as const;

function listLink(appId: string, env: Environment, cursor?: string): string {
  const query = new URLSearchParams({ env });
  if (cursor) query.set('cursor', cursor);
  return `${paths.savedSearches(appId)}?${query.toString()}`;
}

const dollars = (cents: number): string => (cents / 100).toFixed(2);

/** The search in words: its q and each filter it has, as GET /api/v1/listings names them. */
function searchSummary(s: SavedSearchDetail): string {
  const parts: string[] = [];
  if (s.q !== null) parts.push(`“${s.q}”`);
  if (s.category !== null) parts.push(`category ${s.category}`);
  if (s.brand !== null) parts.push(`brand ${s.brand}`);
  if (s.size !== null) parts.push(`size ${s.size}`);
  if (s.color !== null) parts.push(`color ${s.color}`);
  if (s.condition !== null) parts.push(`condition ${s.condition.join(' or ')}`);
  if (s.tag !== null) parts.push(`tagged ${s.tag.join(' and ')}`);
  const min = s.min_price_cents;
  const max = s.max_price_cents;
  if (min !== null && max !== null) parts.push(`price ${dollars(min)} to ${dollars(max)}`);
  else if (min !== null) parts.push(`price from ${dollars(min)}`);
  else if (max !== null) parts.push(`price up to ${dollars(max)}`);
  if (s.impact_mode !== null) parts.push(s.impact_mode ? 'impact mode' : 'not impact mode');
  if (s.seller !== null) parts.push(`seller @${s.seller}`);
  return parts.join(' · ');
}

function deleteForm(ctx: AppContext, env: Environment, s: SavedSearchDetail): SafeHtml {
  return html`<form method="post" action="${paths.savedSearchDelete(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="saved_search_id" value="${s.id}">
<input type="hidden" name="env" value="${env}">
<button type="submit" class="danger small" aria-label="Delete saved search ${s.name}">Delete</button>
</form>`;
}

function savedSearchesBody(
  ctx: AppContext,
  env: Environment,
  page: { items: SavedSearchDetail[]; nextCursor: string | null },
  cursor: string | undefined,
): SafeHtml {
  return html`<p>The searches this app's ${env} credentials saved with <code>POST /api/v1/saved_searches</code>, newest first. Each listing that starts to match one is a <code>listing.matched</code> event, sent to your ${env} webhook endpoints. Those saved through a user's OAuth token are here too; that token itself lists only its user's.</p>
${envSwitch(env, (e) => listLink(ctx.app.id, e))}
${
  page.items.length === 0
    ? html`<p class="empty">${cursor ? 'No older saved searches.' : `No ${env} saved searches yet. A key with the searches scope saves one with POST /api/v1/saved_searches.`}</p>`
    : html`<div class="table-wrap"><table>
<caption>${page.items.length} ${env} saved search${page.items.length === 1 ? '' : 'es'}${cursor ? ', older page' : ''}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Search</th><th scope="col">Saved through</th><th scope="col">Created</th><th scope="col">Last match</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${page.items.map(
  (s) => html`<tr>
<td>${s.name}<br><code class="small-id">${s.id}</code></td>
<td>${searchSummary(s)}</td>
<td>${s.via_token ? "A user's OAuth token" : 'An API key'}</td>
<td>${when(s.created_at)}</td>
<td>${when(s.last_matched_at)}</td>
<td>${deleteForm(ctx, env, s)}</td>
</tr>`,
)}
</tbody>
</table></div>`
}
<nav class="pager" aria-label="Saved search pages">
${cursor ? html`<a href="${listLink(ctx.app.id, env)}">Newest</a>` : ''}
${page.nextCursor ? html`<a href="${listLink(ctx.app.id, env, page.nextCursor)}" rel="next">Older saved searches →</a>` : ''}
</nav>`;
}

export function registerSavedSearchesPages(app: FastifyInstance): void {
  const { savedSearches } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { env: Environment; cursor?: string | undefined; error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const page = await attempt(() =>
      savedSearches.forApp(ctx.app.id, { env: view.env, limit: PAGE_SIZE, cursor: view.cursor }),
    );
    const body = page.error ? html`` : savedSearchesBody(ctx, view.env, page.value, view.cursor);
    return sendPage(
      reply,
      page.error ? page.error.status : status,
      appPage(ctx, 'saved-searches', {
        title: 'Saved searches',
        error: page.error?.message ?? view.error,
        notice: view.notice,
        body,
      }),
    );
  };

  const envOf = (value: unknown): Environment => (value === 'live' ? 'live' : 'sandbox');

  app.get<{ Querystring: { env?: string; cursor?: string; done?: string } }>(
    `${APP_ROUTE}/saved-searches`,
    { config: { appAction: 'saved_searches.view' } },
    async (request, reply) =>
      show(request, reply, 200, {
        env: envOf(request.query.env),
        cursor: request.query.cursor || undefined,
        notice: noticeFor(NOTICES, request.query.done),
      }),
  );

  app.post(
    `${APP_ROUTE}/saved-searches/delete`,
    { config: { formBody: true, appAction: 'saved_searches.delete' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const form = asForm(request.body);
      const env = envOf(field(form, 'env'));
      const id = field(form, 'saved_search_id') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => savedSearches.remove(id, { appId: ctx.app.id }),
            () => ({
              action: 'saved_search.deleted',
              target: id,
              details: { environment: env },
            }),
          ),
        refused: (error) => show(request, reply, error.status, { env, error: error.message }),
        done: () => `${listLink(ctx.app.id, env)}&done=deleted`,
      });
    },
  );
}
