/**
 * The user's apps (list, create) and an app's overview: getting started, the go-live
 * checklist and the request for production approval (granted by an operator with
 * `admin app approve`). Every rule is AppsService's.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppRole } from '../access.ts';
import {
  MILESTONE_STEPS,
  MILESTONES,
  type AppView,
  type ProductionStatus,
  type ReceivedInvitation,
} from '../apps/apps-service.ts';
import type { ApiKeyRow, AppRow } from '../db/schema.ts';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, type AppContext, audited, may, portalContext } from './context.ts';
import { appPage, codeBlock, csrfInput, noticeFor, userPage, when } from './layout.ts';
import { APP_ROUTE, paths, ROUTES } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';
import { createListingCurl } from './snippets.ts';
import { usageChoice, usageSection } from './usage-chart.ts';

const APPS_NOTICES = {
  created: 'The app was created.',
  left: 'You left the app.',
  declined: 'You declined the invitation.',
  deleted:
    'The app was deleted. Its keys, OAuth tokens and client secret no longer work, and its webhook endpoints are disabled.',
} as const;
const OVERVIEW_NOTICES = {
  created: 'Your app is ready. Next: create a sandbox key.',
  accepted: 'You accepted the invitation: welcome to the team.',
  requested:
    'Production approval requested. An operator will review it; this page shows when it is granted.',
} as const;

function invitationsSection(csrfToken: string, invitations: ReceivedInvitation[]): SafeHtml {
  if (invitations.length === 0) return html``;
  const answer = (i: ReceivedInvitation, to: 'accept' | 'decline', label: string) =>
    html`<form class="inline-form" method="post" action="${paths.invitationAnswer(i.id, to)}">
${csrfInput(csrfToken)}
<button type="submit"${to === 'accept' ? html` class="primary"` : ''}>${label} <span class="visually-hidden">the invitation to ${i.app_name}</span></button>
</form>`;
  return html`<section class="card" aria-labelledby="invitations-heading">
<h2 id="invitations-heading">Invitations</h2>
<ul class="invitations">
${invitations.map(
  (
    i,
  ) => html`<li><strong>${i.app_name}</strong> as <strong>${i.role}</strong>${i.invited_by ? html`, from @${i.invited_by}` : ''}; expires ${when(i.expires_at)}
${answer(i, 'accept', 'Accept')} ${answer(i, 'decline', 'Decline')}</li>`,
)}
</ul>
</section>`;
}

function appsBody(
  csrfToken: string,
  apps: (AppRow & { role: AppRole })[],
  invitations: ReceivedInvitation[],
  name: string,
): SafeHtml {
  return html`<h1>Your apps</h1>
${invitationsSection(csrfToken, invitations)}
${
  apps.length === 0
    ? html`<p>You have no apps yet. An app holds your API keys, OAuth settings and webhook endpoints.</p>`
    : html`<div class="table-wrap"><table>
<caption class="visually-hidden">Your apps</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Your role</th><th scope="col">Client id</th><th scope="col">Production</th><th scope="col">Created</th></tr></thead>
<tbody>
${apps.map(
  (a) => html`<tr>
<td><a href="${paths.app(a.id)}">${a.name}</a></td>
<td>${a.role}</td>
<td><code>${a.id}</code></td>
<td>${a.productionApproved ? 'Approved' : a.productionRequestedAt ? 'Requested' : 'Sandbox only'}</td>
<td>${when(a.createdAt)}</td>
</tr>`,
)}
</tbody>
</table></div>`
}
<section class="card" aria-labelledby="create-app-heading">
<h2 id="create-app-heading">${apps.length === 0 ? 'Create your first app' : 'Create an app'}</h2>
<form method="post" action="${paths.apps}">
${csrfInput(csrfToken)}
<label for="app-name">App name</label>
<input type="text" id="app-name" name="name" value="${name}" required maxlength="100" autocomplete="off">
<div class="actions"><button type="submit" class="primary">Create app</button></div>
</form>
</section>`;
}

function milestoneItem(
  name: (typeof MILESTONES)[number],
  state: AppView['milestones'][typeof name],
): SafeHtml {
  return html`<li class="${state.done ? 'done' : 'todo'}">
<span class="mark" aria-hidden="true">${state.done ? '✓' : '○'}</span>
<div><strong>${MILESTONE_STEPS[name]}</strong> <code class="muted">${name}</code><br>
${state.done ? html`<span class="status-ok">Done</span> ${when(state.completed_at)}` : html`<span class="status-todo">Not done</span>`}</div>
</li>`;
}

function productionItem(
  ctx: AppContext,
  production: ProductionStatus,
  milestonesDone: boolean,
): SafeHtml {
  const state = production.approved
    ? html`<span class="status-ok">Approved</span> ${when(production.approved_at)}`
    : production.requested_at
      ? html`<span class="status-wait">Requested</span> ${when(production.requested_at)}. An operator reviews it.`
      : html`<span class="status-todo">Not requested</span>`;
  return html`<li class="${production.approved ? 'done' : 'todo'}">
<span class="mark" aria-hidden="true">${production.approved ? '✓' : '○'}</span>
<div><strong>Production approval</strong> (needed for live webhook endpoints)<br>${state}
${
  production.approved || production.requested_at || !may(ctx, 'production.request')
    ? ''
    : html`<form method="post" action="${paths.productionRequest(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<button type="submit"${milestonesDone ? html` class="primary"` : ''}>Request production approval</button>
</form>`
}
</div>
</li>`;
}

function gettingStarted(ctx: AppContext, baseUrl: string, keys: ApiKeyRow[]): SafeHtml {
  const sandboxKeys = keys.filter((k) => k.environment === 'sandbox' && !k.revokedAt);
  return html`<section class="card" aria-labelledby="start-heading">
<h2 id="start-heading">Getting started</h2>
<ol class="steps">
<li>${
    sandboxKeys.length === 0
      ? html`Create a sandbox key:
<form class="inline-form" method="post" action="${paths.keys(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="env" value="sandbox">
<input type="hidden" name="scopes" value="read">
<input type="hidden" name="scopes" value="listings:write">
<button type="submit" class="primary">Create a sandbox key</button>
</form>`
      : html`You have a sandbox key (<code>${sandboxKeys[0]!.prefix}…</code>). Its full value was shown once; <a href="${paths.keys(ctx.app.id)}">create another</a> if you lost it.`
  }</li>
<li>Create a listing with it. The key page shows this line with your key filled in:
${codeBlock('curl-template', 'curl line', createListingCurl(baseUrl, 'YOUR_SANDBOX_KEY'))}</li>
<li>See it in the <a href="${paths.inventory(ctx.app.id)}">sandbox inventory</a>. Sandbox listings never appear on the public feed.</li>
</ol>
</section>`;
}

function overviewBody(
  ctx: AppContext,
  baseUrl: string,
  show: AppView,
  production: ProductionStatus,
  keys: ApiKeyRow[],
  usage: SafeHtml,
): SafeHtml {
  const milestonesDone = MILESTONES.every((m) => show.milestones[m].done);
  return html`<dl class="facts">
<dt>Client id (app id)</dt><dd><code id="client-id">${ctx.app.id}</code></dd>
<dt>Owner</dt><dd>@${ctx.app.ownerUsername}</dd>
<dt>Your role</dt><dd>${ctx.app.role}</dd>
<dt>Created</dt><dd>${when(ctx.app.createdAt)}</dd>
</dl>
${milestonesDone ? '' : gettingStarted(ctx, baseUrl, keys)}
${usage}
<section class="card" aria-labelledby="golive-heading">
<h2 id="golive-heading">Go-live checklist</h2>
<ol class="checklist">
${MILESTONES.map((m) => milestoneItem(m, show.milestones[m]))}
<li class="${milestonesDone ? 'done' : 'todo'}">
<span class="mark" aria-hidden="true">${milestonesDone ? '✓' : '○'}</span>
<div><strong>Live API keys</strong><br>${
    milestonesDone
      ? html`<span class="status-ok">Unlocked</span>: <a href="${paths.keys(ctx.app.id)}">create a live key</a>.`
      : html`<span class="status-todo">Locked</span> until every milestone above is done.`
  }</div>
</li>
${productionItem(ctx, production, milestonesDone)}
</ol>
</section>`;
}

export function registerAppsPages(app: FastifyInstance): void {
  const { apps, keys, requestLogs } = app.services;

  const showApps = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { name?: string; error?: string; notice?: string },
  ) => {
    const ctx = portalContext(app, request, reply);
    const [memberships, invitations] = await Promise.all([
      apps.listMemberships(ctx.user.id),
      apps.invitationsFor(ctx.user.id),
    ]);
    return sendPage(
      reply,
      status,
      userPage(ctx, {
        title: 'Your apps',
        error: view.error,
        notice: view.notice,
        body: appsBody(ctx.csrfToken, memberships, invitations, view.name ?? ''),
      }),
    );
  };

  const showOverview = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const choice = usageChoice(request.query as Record<string, string | undefined>);
    const [show, keyRows, usage] = await Promise.all([
      apps.show(ctx.app.id),
      keys.list(ctx.app.id),
      app.config.requestLogs
        ? requestLogs.usage(ctx.app.id, { env: choice.env, days: choice.days })
        : null,
    ]);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'overview', {
        title: 'Overview',
        ...view,
        body: overviewBody(
          ctx,
          app.config.baseUrl,
          show,
          apps.productionStatus(ctx.app),
          keyRows,
          usageSection(ctx.app.id, choice, usage),
        ),
      }),
    );
  };

  app.get<{ Querystring: { done?: string } }>(ROUTES.apps, async (request, reply) =>
    showApps(request, reply, 200, { notice: noticeFor(APPS_NOTICES, request.query.done) }),
  );

  app.post(ROUTES.apps, { config: { formBody: true } }, async (request, reply) => {
    const ctx = portalContext(app, request, reply);
    const name = field(asForm(request.body), 'name') ?? '';
    return postThenRedirect(reply, {
      run: () => apps.create({ ownerUsername: ctx.user.username, name }),
      refused: (error) => showApps(request, reply, error.status, { name, error: error.message }),
      done: (created) => `${paths.app(created.id)}?done=created`,
    });
  });

  for (const answer of ['accept', 'decline'] as const)
    app.post<{ Params: { invitationId: string } }>(
      `/invitations/:invitationId/${answer}`,
      { config: { formBody: true } },
      async (request, reply) => {
        const ctx = portalContext(app, request, reply);
        return postThenRedirect(reply, {
          run: () =>
            audited(
              app,
              request,
              ctx.user,
              (a) => a.app_id,
              () => apps.answerInvitation(request.params.invitationId, ctx.user.id, answer),
              (a) => ({
                action: a.answer === 'accepted' ? 'invitation.accepted' : 'invitation.declined',
                target: ctx.user.username,
                details: { role: a.role },
              }),
            ),
          refused: (error) => showApps(request, reply, error.status, { error: error.message }),
          done: (answered) =>
            answered.answer === 'accepted'
              ? `${paths.app(answered.app_id)}?done=accepted`
              : `${paths.apps}?done=declined`,
        });
      },
    );

  app.get<{ Querystring: { done?: string; usage_env?: string; usage_days?: string } }>(
    APP_ROUTE,
    { config: { appAction: 'app.view' } },
    async (request, reply) =>
      showOverview(request, reply, 200, {
        notice: noticeFor(OVERVIEW_NOTICES, request.query.done),
      }),
  );

  app.post(
    `${APP_ROUTE}/production-request`,
    { config: { formBody: true, appAction: 'production.request' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.requestProduction(ctx.app.id),
            () => ({
              action: 'production.requested',
            }),
          ),
        refused: (error) => showOverview(request, reply, error.status, { error: error.message }),
        done: () => {
          request.log.info(
            { event: 'production_requested', appId: ctx.app.id },
            'production approval requested',
          );
          return `${paths.app(ctx.app.id)}?done=requested`;
        },
      });
    },
  );
}
