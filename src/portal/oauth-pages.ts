/**
 * An app's OAuth settings: redirect URIs (added and removed through AppsService, which applies
 * the rules of docs/oauth.md, checkRedirectUri) and the client secret (created or rotated; shown
 * once).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, type AppContext, audited } from './context.ts';
import { appPage, codeBlock, csrfInput, noticeFor, secretOnce, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';

const NOTICES = {
  added: 'The redirect URI was added.',
  removed: 'The redirect URI was removed.',
} as const;

interface OAuthView {
  /** The client secret just made (shown once). */
  secret?: string | undefined;
  /** The URI typed, to show it again after a refusal. */
  uri?: string | undefined;
}

function secretSection(
  ctx: AppContext,
  active: { prefix: string; created_at: string } | null,
  view: OAuthView,
): SafeHtml {
  return html`<section class="card" aria-labelledby="secret-heading">
<h2 id="secret-heading">Client secret</h2>
${
  view.secret
    ? secretOnce({
        id: 'client-secret',
        heading: 'Your new client secret',
        label: 'Client secret',
        secret: view.secret,
        stored:
          'Only a hash of it is stored. Keep it on your server: never put it in a browser or a mobile app.',
      })
    : ''
}
${
  active
    ? html`<p>Active secret <code>${active.prefix}…</code>, created ${when(active.created_at)}.</p>
<form method="post" action="${paths.clientSecret(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label class="choice"><input type="checkbox" name="confirm" value="rotate" required> I understand that the current secret stops working at once.</label>
<div class="actions"><button type="submit" class="danger">Rotate the client secret</button></div>
</form>`
    : html`<p>This app has no client secret yet. Your server needs one to exchange authorization codes at <code>/oauth/token</code>.</p>
<form method="post" action="${paths.clientSecret(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<div class="actions"><button type="submit" class="primary">Create a client secret</button></div>
</form>`
}
</section>`;
}

function oauthBody(
  ctx: AppContext,
  baseUrl: string,
  uris: string[],
  active: { prefix: string; created_at: string } | null,
  view: OAuthView,
): SafeHtml {
  return html`<p>Apps that act for other users send them to <code>${baseUrl}/oauth/authorize</code> with this client id.</p>
<p class="label" id="client-id-label">Client id</p>
${codeBlock('oauth-client-id', 'client id', ctx.app.id)}
<section class="card" aria-labelledby="uris-heading">
<h2 id="uris-heading">Redirect URIs</h2>
<p class="muted">Where users come back after they allow or deny your app. Matched exactly. https only, no fragment;
plain http only for <code>localhost</code> and <code>127.0.0.1</code> during development.</p>
${
  uris.length === 0
    ? html`<p>No redirect URI yet.</p>`
    : html`<ul class="uris">
${uris.map(
  (uri) => html`<li><code>${uri}</code>
<form method="post" action="${paths.redirectUriRemove(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="uri" value="${uri}">
<button type="submit" class="danger small" aria-label="Remove ${uri}">Remove</button>
</form></li>`,
)}
</ul>`
}
<form method="post" action="${paths.redirectUris(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="redirect-uri">Add a redirect URI</label>
<input type="url" id="redirect-uri" name="uri" value="${view.uri ?? ''}" required maxlength="2048" placeholder="https://example.com/oauth/callback" autocomplete="off" spellcheck="false">
<div class="actions"><button type="submit" class="primary">Add</button></div>
</form>
</section>
${secretSection(ctx, active, view)}`;
}

export function registerOAuthPages(app: FastifyInstance): void {
  const { apps } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: OAuthView & { error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const [shown, active] = await Promise.all([
      apps.show(ctx.app.id),
      apps.clientSecretInfo(ctx.app.id),
    ]);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'oauth', {
        title: 'OAuth',
        error: view.error,
        notice: view.notice,
        body: oauthBody(ctx, app.config.baseUrl, shown.redirect_uris, active, view),
      }),
    );
  };

  app.get<{ Querystring: { done?: string } }>(
    `${APP_ROUTE}/oauth`,
    { config: { appAction: 'app.view' } },
    async (request, reply) =>
      show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post(
    `${APP_ROUTE}/oauth/redirect-uris`,
    { config: { formBody: true, appAction: 'oauth.manage' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const uri = field(asForm(request.body), 'uri') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.addRedirectUri(ctx.app.id, uri),
            () => ({
              action: 'redirect_uri.added',
              target: uri.trim(),
            }),
          ),
        refused: (error) => show(request, reply, error.status, { uri, error: error.message }),
        done: () => `${paths.oauth(ctx.app.id)}?done=added`,
      });
    },
  );

  app.post(
    `${APP_ROUTE}/oauth/redirect-uris/remove`,
    { config: { formBody: true, appAction: 'oauth.manage' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      return postThenRedirect(reply, {
        run: () => {
          const uri = field(asForm(request.body), 'uri') ?? '';
          return audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.removeRedirectUri(ctx.app.id, uri),
            () => ({
              action: 'redirect_uri.removed',
              target: uri,
            }),
          );
        },
        refused: (error) => show(request, reply, error.status, { error: error.message }),
        done: () => `${paths.oauth(ctx.app.id)}?done=removed`,
      });
    },
  );

  /** Creates or rotates the secret (the CLI's `app secret`); it is in this response only. */
  app.post(
    `${APP_ROUTE}/oauth/secret`,
    { config: { formBody: true, appAction: 'oauth.manage' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const active = await apps.clientSecretInfo(ctx.app.id);
      if (active && field(asForm(request.body), 'confirm') !== 'rotate') {
        return show(request, reply, 400, {
          error: 'Tick the box to confirm: rotating stops the current secret at once.',
        });
      }
      const rotated = await audited(
        app,
        request,
        ctx.user,
        ctx.app.id,
        () => apps.rotateClientSecret(ctx.app.id),
        () => ({
          action: 'client_secret.rotated',
          details: { first: active === null },
        }),
      );
      request.log.info(
        { event: 'client_secret_rotated', appId: ctx.app.id },
        active ? 'client secret rotated' : 'client secret created',
      );
      return show(request, reply, 201, { secret: rotated.client_secret });
    },
  );
}
