/**
 * An app's settings: rename it, and delete it. Deleting asks for the app's name typed out, and
 * then nothing of the app keeps working (AppsService.delete: keys, OAuth tokens and the client
 * secret revoked, endpoints disabled), exactly as `admin app delete` does.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, type AppContext, audited, may } from './context.ts';
import { appPage, csrfInput, noticeFor } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';

const NOTICES = { renamed: 'The app was renamed.' } as const;

function settingsBody(ctx: AppContext, sent: { name?: string; confirm?: string }): SafeHtml {
  return html`<section class="card" aria-labelledby="rename-heading">
<h2 id="rename-heading">Name</h2>
<p>Users see it on the consent page when your app asks for access.</p>
<form method="post" action="${paths.appRename(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="app-name">App name</label>
<input type="text" id="app-name" name="name" value="${sent.name ?? ctx.app.name}" required maxlength="100" autocomplete="off">
<div class="actions"><button type="submit">Rename app</button></div>
</form>
</section>
${may(ctx, 'app.delete') ? deleteSection(ctx, sent) : ''}`;
}

function deleteSection(ctx: AppContext, sent: { confirm?: string }): SafeHtml {
  return html`<section class="card danger-zone" aria-labelledby="delete-heading">
<h2 id="delete-heading">Delete this app</h2>
<p>Deleting cannot be undone. At once, its API keys, its users' OAuth tokens and its client secret stop working (401), and its webhook endpoints are disabled. Its sandbox listings stay with you.</p>
<form method="post" action="${paths.appDelete(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="confirm-name">Type the app's name, <strong>${ctx.app.name}</strong>, to confirm</label>
<input type="text" id="confirm-name" name="confirm" value="${sent.confirm ?? ''}" required autocomplete="off" spellcheck="false">
<div class="actions"><button type="submit" class="danger">Delete app</button></div>
</form>
</section>`;
}

export function registerSettingsPages(app: FastifyInstance): void {
  const { apps } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string; name?: string; confirm?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'settings', {
        title: 'Settings',
        error: view.error,
        notice: view.notice,
        body: settingsBody(ctx, view),
      }),
    );
  };

  app.get<{ Querystring: { done?: string } }>(
    `${APP_ROUTE}/settings`,
    { config: { appAction: 'app.rename' } },
    async (request, reply) =>
      show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post(
    `${APP_ROUTE}/settings/name`,
    { config: { formBody: true, appAction: 'app.rename' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const name = field(asForm(request.body), 'name') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.rename(ctx.app.id, name),
            (r) => ({
              action: 'app.renamed',
              details: { from: ctx.app.name, to: r.name },
            }),
          ),
        refused: (error) => show(request, reply, error.status, { error: error.message, name }),
        done: () => `${paths.settings(ctx.app.id)}?done=renamed`,
      });
    },
  );

  app.post(
    `${APP_ROUTE}/settings/delete`,
    { config: { formBody: true, appAction: 'app.delete' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const confirm = field(asForm(request.body), 'confirm') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.delete(ctx.app.id, confirm),
            () => ({
              action: 'app.deleted',
              details: { name: ctx.app.name },
            }),
          ),
        refused: (error) => show(request, reply, error.status, { error: error.message, confirm }),
        done: () => {
          request.log.info({ event: 'app_deleted', appId: ctx.app.id }, 'app deleted');
          return `${paths.apps}?done=deleted`;
        },
      });
    },
  );
}
