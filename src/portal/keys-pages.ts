/**
 * An app's API keys: create (sandbox or live, with chosen scopes; the key is shown once),
 * list (prefix, scopes, created, last used), revoke. KeysService decides everything, including
 * the refusal of a live key before the go-live milestones, in the CLI's words.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKeyRow } from '../db/schema.ts';
import type { CreatedKey } from '../apps/keys-service.ts';
import { SCOPES, type Scope } from '../access.ts';
import { SCOPE_DESCRIPTIONS } from '../generated/constants.ts';
import { asForm, field, fieldValues } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { appPage, codeBlock, csrfInput, noticeFor, secretOnce, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { createListingCurl, listListingsCurl, meCurl } from './snippets.ts';

const NOTICES = { revoked: 'The key was revoked. Requests with it now get 401.' } as const;

/**
 * What each scope lets a key do: the document's scope descriptions (the consent page has end-user
 * words).
 */
const KEY_SCOPE_WORDS = Object.fromEntries(
  SCOPES.map((s) => [s, `${s}: ${SCOPE_DESCRIPTIONS[s]}`]),
) as Record<Scope, string>;

interface KeysView {
  created?: CreatedKey | undefined;
  /** The form as sent, to show it again after a refusal. */
  form?: { env: string; scopes: string[] } | undefined;
}

function createdBox(created: CreatedKey, baseUrl: string, appId: string): SafeHtml {
  const after =
    created.env === 'sandbox'
      ? html`<h3>Create your first sandbox listing</h3>
<p>Paste this into a terminal. It creates a draft listing in the sandbox, visible only to you:</p>
${codeBlock('curl-create', 'curl line', createListingCurl(baseUrl, created.key))}
<p>Then see it in the <a href="${paths.inventory(appId)}">sandbox inventory</a>, or list it with:</p>
${codeBlock('curl-list', 'list command', listListingsCurl(baseUrl, created.key))}`
      : html`<p>Try it:</p>${codeBlock('curl-me', 'curl line', meCurl(baseUrl, created.key))}`;
  return secretOnce({
    id: 'new-key',
    heading: `Your new ${created.env} key`,
    label: `${created.env === 'live' ? 'Live' : 'Sandbox'} API key (scopes: ${created.scopes.join(' ')})`,
    secret: created.key,
    stored: 'Only a hash of it is stored; if you lose it, create a new key and revoke this one.',
    after,
  });
}

function keyRow(ctx: AppContext, key: ApiKeyRow): SafeHtml {
  return html`<tr>
<td><code>${key.prefix}…</code></td>
<td><span class="env env-${key.environment}">${key.environment}</span></td>
<td>${key.scopes.join(' ')}</td>
<td>${when(key.createdAt)}</td>
<td>${when(key.lastUsedAt)}</td>
<td>${key.revokedAt ? html`Revoked ${when(key.revokedAt)}` : 'Active'}</td>
<td>${
    key.revokedAt
      ? ''
      : html`<form method="post" action="${paths.keyRevoke(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="key_id" value="${key.id}">
<button type="submit" class="danger small" aria-label="Revoke key ${key.prefix}">Revoke</button>
</form>`
  }</td>
</tr>`;
}

function keysBody(ctx: AppContext, baseUrl: string, keys: ApiKeyRow[], view: KeysView): SafeHtml {
  const env = view.form?.env ?? 'sandbox';
  const scopes = view.form?.scopes ?? [...SCOPES];
  return html`${view.created ? createdBox(view.created, baseUrl, ctx.app.id) : ''}
<section class="card" aria-labelledby="new-key-heading">
<h2 id="new-key-heading">Create a key</h2>
<form method="post" action="${paths.keys(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<fieldset>
<legend>Environment</legend>
<label class="choice"><input type="radio" name="env" value="sandbox"${env === 'sandbox' ? html` checked` : ''}> Sandbox <span class="muted">(svc_sandbox_: isolated test listings)</span></label>
<label class="choice"><input type="radio" name="env" value="live"${env === 'live' ? html` checked` : ''}> Live <span class="muted">(svc_live_: the real marketplace; needs the go-live checklist)</span></label>
</fieldset>
<fieldset>
<legend>Scopes</legend>
${SCOPES.map(
  (s) =>
    html`<label class="choice"><input type="checkbox" name="scopes" value="${s}"${scopes.includes(s) ? html` checked` : ''}> ${KEY_SCOPE_WORDS[s]}</label>`,
)}
</fieldset>
<div class="actions"><button type="submit" class="primary">Create key</button></div>
</form>
</section>
<section aria-labelledby="keys-heading">
<h2 id="keys-heading">Keys</h2>
${
  keys.length === 0
    ? html`<p>No keys yet.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Key</th><th scope="col">Environment</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${keys.map((k) => keyRow(ctx, k))}
</tbody>
</table></div>`
}
</section>`;
}

export function registerKeysPages(app: FastifyInstance): void {
  const { keys } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: KeysView & { error?: string; notice?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const rows = await keys.list(ctx.app.id);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'keys', {
        title: 'API keys',
        error: view.error,
        notice: view.notice,
        body: keysBody(ctx, app.config.baseUrl, rows, view),
      }),
    );
  };

  app.get<{ Querystring: { done?: string } }>(`${APP_ROUTE}/keys`, async (request, reply) =>
    show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  /** The new key is in this response only: not in a redirect, a URL or a log line. */
  app.post(`${APP_ROUTE}/keys`, { config: { formBody: true } }, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = { env: field(form, 'env') ?? '', scopes: fieldValues(form, 'scopes') };
    // No box ticked means no scope (KeysService refuses it), not the default scopes.
    const created = await attempt(() =>
      keys.create({ appId: ctx.app.id, env: sent.env, scopes: sent.scopes }),
    );
    if (created.error)
      return show(request, reply, created.error.status, {
        form: sent,
        error: created.error.message,
      });
    request.log.info(
      {
        event: 'api_key_created',
        appId: ctx.app.id,
        keyId: created.value.id,
        env: created.value.env,
      },
      'API key created',
    );
    return show(request, reply, 201, { created: created.value });
  });

  app.post(`${APP_ROUTE}/keys/revoke`, { config: { formBody: true } }, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const revoked = await attempt(() =>
      keys.revoke(field(asForm(request.body), 'key_id') ?? '', { appId: ctx.app.id }),
    );
    if (revoked.error)
      return show(request, reply, revoked.error.status, { error: revoked.error.message });
    return reply.redirect(`${paths.keys(ctx.app.id)}?done=revoked`, 303);
  });
}
