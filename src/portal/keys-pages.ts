/**
 * An app's API keys: create (named, sandbox or live, with chosen scopes; the key is shown once),
 * list (name, prefix, scopes, created, last used, expiry), and per key: rename, roll (a
 * replacement shown once; the old key works for a chosen time) and revoke. KeysService decides
 * everything, including the refusal of a live key before the go-live milestones, in the CLI's
 * words.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKeyRow } from '../db/schema.ts';
import { madeByWords } from '../lib/made-by.ts';
import {
  DEFAULT_KEY_SCOPES,
  keyStopped,
  type CreatedKey,
  type ListedKey,
  type RolledKey,
} from '../apps/keys-service.ts';
import { credentialsAction, keyCreationActions, KEY_SCOPES, type KeyScope } from '../access.ts';
import { KEY_SCOPE_DESCRIPTIONS } from '../generated/constants.ts';
import { asForm, field, fieldValues } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, audited, permit, type AppContext } from './context.ts';
import { appPage, codeBlock, csrfInput, noticeFor, secretOnce, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';
import { createListingCurl, listListingsCurl, meCurl } from './snippets.ts';

const NOTICES = {
  revoked: 'The key was revoked. Requests with it now get 401.',
  renamed: 'The key was renamed.',
} as const;

/** The roll form's choices: how long the old key keeps working (KeysService ROLL_OVERLAPS). */
const ROLL_CHOICES = [
  ['1h', 'for 1 hour'],
  ['24h', 'for 24 hours'],
  ['7d', 'for 7 days'],
  ['now', 'no: stop it now'],
] as const;

const displayName = (key: ApiKeyRow) => key.name || 'Untitled key';

/** What a key is now: active, rolled (working until…), expired or revoked. */
function keyStatus(key: ApiKeyRow): SafeHtml {
  if (key.revokedAt) return html`Revoked ${when(key.revokedAt)}`;
  if (key.expiresAt && keyStopped(key)) return html`Expired ${when(key.expiresAt)}`;
  if (key.expiresAt) return html`<strong>Rolled:</strong> works until ${when(key.expiresAt)}`;
  return html`Active`;
}

/**
 * What each scope lets a key do: the document's scope descriptions (the consent page has end-user
 * words).
 */
const KEY_SCOPE_WORDS = Object.fromEntries(
  KEY_SCOPES.map((s) => [s, html`<span>${s}: ${withCode(KEY_SCOPE_DESCRIPTIONS[s])}</span>`]),
) as Record<KeyScope, SafeHtml>;

/**
 * The document's Markdown code spans (`…`) as <code>, the rest as text. In one <span> (above):
 * label.choice is a flex box, and each <code> would be an item of its own that does not shrink.
 */
function withCode(markdown: string): SafeHtml {
  return html`${markdown
    .split('`')
    .map((part, i) => (i % 2 === 1 ? html`<code>${part}</code>` : html`${part}`))}`;
}

interface KeysView {
  created?: (CreatedKey & Partial<Pick<RolledKey, 'replaced'>>) | undefined;
  /** The form as sent, to show it again after a refusal. */
  form?: { env: string; scopes: string[]; name: string | undefined } | undefined;
}

function createdBox(
  created: CreatedKey & Partial<Pick<RolledKey, 'replaced'>>,
  baseUrl: string,
  appId: string,
): SafeHtml {
  const after =
    created.env === 'sandbox'
      ? html`<h3>Create your first sandbox listing</h3>
<p>Paste this into a terminal. It creates a draft listing in the sandbox, visible only to you:</p>
${codeBlock('curl-create', 'curl line', createListingCurl(baseUrl, created.key))}
<p>Then see it in the <a href="${paths.inventory(appId)}">sandbox inventory</a>, or list it with:</p>
${codeBlock('curl-list', 'list command', listListingsCurl(baseUrl, created.key))}`
      : html`<p>Try it:</p>${codeBlock('curl-me', 'curl line', meCurl(baseUrl, created.key))}`;
  const rolled = created.replaced
    ? html`<p>It replaces the key you rolled, which keeps working until ${when(created.replaced.expires_at)}. Put the new key in place before then.</p>`
    : '';
  return secretOnce({
    id: 'new-key',
    heading: `Your new ${created.env} key: ${created.name}`,
    label: `${created.env === 'live' ? 'Live' : 'Sandbox'} API key (scopes: ${created.scopes.join(' ')})`,
    secret: created.key,
    stored: 'Only a hash of it is stored; if you lose it, create a new key and revoke this one.',
    after: html`${rolled}${after}`,
  });
}

function revokeForm(ctx: AppContext, key: ApiKeyRow): SafeHtml {
  return html`<form method="post" action="${paths.keyRevoke(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="key_id" value="${key.id}">
<button type="submit" class="danger small" aria-label="Revoke key ${displayName(key)} (${key.prefix})">Revoke</button>
</form>`;
}

function keyRow(ctx: AppContext, key: ListedKey): SafeHtml {
  return html`<tr>
<td><a href="${paths.key(ctx.app.id, key.id)}">${displayName(key)}</a></td>
<td><code>${key.prefix}…</code></td>
<td><span class="env env-${key.environment}">${key.environment}</span></td>
<td>${key.scopes.join(' ')}</td>
<td>${when(key.createdAt)}</td>
<td>${madeByWords(key)}</td>
<td>${when(key.lastUsedAt)}</td>
<td>${keyStatus(key)}</td>
<td>${keyStopped(key) ? '' : revokeForm(ctx, key)}</td>
</tr>`;
}

/** One key: its facts, rename, roll, revoke. */
function keyBody(ctx: AppContext, key: ApiKeyRow, nameSent?: string): SafeHtml {
  const stopped = keyStopped(key);
  return html`<p><a href="${paths.keys(ctx.app.id)}">All keys</a></p>
<section class="card" aria-labelledby="key-heading">
<h2 id="key-heading">${displayName(key)}</h2>
<dl class="facts">
<dt>Key</dt><dd><code>${key.prefix}…</code></dd>
<dt>Environment</dt><dd><span class="env env-${key.environment}">${key.environment}</span></dd>
<dt>Scopes</dt><dd>${key.scopes.join(' ')}</dd>
<dt>Created</dt><dd>${when(key.createdAt)}</dd>
<dt>Last used</dt><dd>${when(key.lastUsedAt)}</dd>
<dt>Status</dt><dd>${keyStatus(key)}</dd>
</dl>
</section>
<section class="card" aria-labelledby="rename-heading">
<h2 id="rename-heading">Name</h2>
<form method="post" action="${paths.keyRename(ctx.app.id, key.id)}">
${csrfInput(ctx.csrfToken)}
<label for="key-name">Name</label>
<input type="text" id="key-name" name="name" value="${nameSent ?? key.name}" maxlength="100" required>
<div class="actions"><button type="submit">Rename</button></div>
</form>
</section>
${
  stopped || key.expiresAt
    ? ''
    : html`<section class="card" aria-labelledby="roll-heading">
<h2 id="roll-heading">Roll this key</h2>
<p>Rolling creates a replacement with the same name and scopes, shown once. The old key can keep working while you put the new one in place.</p>
<form method="post" action="${paths.keyRoll(ctx.app.id, key.id)}">
${csrfInput(ctx.csrfToken)}
<label for="expires-in">Keep the old key working</label>
<select id="expires-in" name="expires_in">
${ROLL_CHOICES.map(([value, label]) => html`<option value="${value}"${value === '24h' ? html` selected` : ''}>${label}</option>`)}
</select>
<div class="actions"><button type="submit" class="primary">Roll key</button></div>
</form>
</section>
<section class="card" aria-labelledby="revoke-heading">
<h2 id="revoke-heading">Revoke</h2>
<p>Requests with a revoked key get 401 at once.</p>
${revokeForm(ctx, key)}
</section>`
}`;
}

function keysBody(ctx: AppContext, baseUrl: string, keys: ListedKey[], view: KeysView): SafeHtml {
  const env = view.form?.env ?? 'sandbox';
  // Ticked at first: the scopes a key gets when none are chosen (searches and
  // webhooks:write only when chosen).
  const scopes = view.form?.scopes ?? [...DEFAULT_KEY_SCOPES];
  return html`${view.created ? createdBox(view.created, baseUrl, ctx.app.id) : ''}
<section class="card" aria-labelledby="new-key-heading">
<h2 id="new-key-heading">Create a key</h2>
<form method="post" action="${paths.keys(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="new-key-name">Name <span class="muted">(what uses it, e.g. "Shop sync, production")</span></label>
<input type="text" id="new-key-name" name="name" value="${view.form?.name ?? ''}" maxlength="100" required>
<fieldset>
<legend>Environment</legend>
<label class="choice"><input type="radio" name="env" value="sandbox"${env === 'sandbox' ? html` checked` : ''}> Sandbox <span class="muted">(svc_sandbox_: isolated test listings)</span></label>
<label class="choice"><input type="radio" name="env" value="live"${env === 'live' ? html` checked` : ''}> Live <span class="muted">(svc_live_: the real marketplace; needs the go-live checklist)</span></label>
</fieldset>
<fieldset>
<legend>Scopes</legend>
${KEY_SCOPES.map(
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
<thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Environment</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Made by</th><th scope="col">Last used</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
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

  const view = { config: { appAction: 'app.view' } } as const;
  /** A change of keys: a developer's for sandbox keys; each form checks the key's environment. */
  const change = { config: { formBody: true, appAction: 'sandbox.credentials' } } as const;
  /** 403 unless the user's role may change this key (of this app; another's is not found). */
  const permitKey = async (ctx: AppContext, keyId: string) => {
    const key = await keys.get(keyId, { appId: ctx.app.id });
    permit(ctx, credentialsAction(key.environment));
    return key;
  };

  app.get<{ Querystring: { done?: string } }>(`${APP_ROUTE}/keys`, view, async (request, reply) =>
    show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  /** The new key is in this response only: not in a redirect, a URL or a log line. */
  app.post(`${APP_ROUTE}/keys`, change, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = {
      env: field(form, 'env') ?? '',
      scopes: fieldValues(form, 'scopes'),
      // Absent (an older form or a script): the default name; sent empty: refused.
      name: field(form, 'name'),
    };
    // No box ticked means no scope (KeysService refuses it), not the default scopes.
    const created = await attempt(() => {
      for (const action of keyCreationActions(sent.env, sent.scopes)) permit(ctx, action);
      return audited(
        app,
        request,
        ctx.user,
        ctx.app.id,
        () =>
          keys.create({ ...sent, appId: ctx.app.id, by: { via: 'portal', userId: ctx.user.id } }),
        (k) => ({
          action: 'key.created',
          target: k.id,
          details: { environment: k.env, scopes: k.scopes, name: k.name },
        }),
      );
    });
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

  const showKey = async (
    request: FastifyRequest<{ Params: { keyId: string } }>,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string; name?: string } = {},
  ) => {
    const ctx = appContext(app, request, reply);
    const key = await keys.get(request.params.keyId, { appId: ctx.app.id });
    return sendPage(
      reply,
      status,
      appPage(ctx, 'keys', {
        title: displayName(key),
        error: view.error,
        notice: view.notice,
        body: keyBody(ctx, key, view.name),
      }),
    );
  };

  app.get<{ Params: { keyId: string }; Querystring: { done?: string } }>(
    `${APP_ROUTE}/keys/:keyId`,
    view,
    async (request, reply) =>
      showKey(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post<{ Params: { keyId: string } }>(
    `${APP_ROUTE}/keys/:keyId/name`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const name = field(asForm(request.body), 'name') ?? '';
      return postThenRedirect(reply, {
        run: async () => {
          await permitKey(ctx, request.params.keyId);
          return audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => keys.rename(request.params.keyId, name, { appId: ctx.app.id }),
            (k) => ({ action: 'key.renamed', target: k.id, details: { name: k.name } }),
          );
        },
        refused: (error) => showKey(request, reply, error.status, { error: error.message, name }),
        done: (renamed) => `${paths.key(ctx.app.id, renamed.id)}?done=renamed`,
      });
    },
  );

  /** Like a create, the replacement is in this response only. */
  app.post<{ Params: { keyId: string } }>(
    `${APP_ROUTE}/keys/:keyId/roll`,
    change,
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const rolled = await attempt(async () => {
        await permitKey(ctx, request.params.keyId);
        const expiresIn = field(asForm(request.body), 'expires_in') ?? '';
        return audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () =>
            keys.roll(
              request.params.keyId,
              expiresIn,
              { appId: ctx.app.id },
              { via: 'portal', userId: ctx.user.id },
            ),
          (k) => ({
            action: 'key.rolled',
            target: k.replaced.id,
            details: {
              replacement: k.id,
              environment: k.env,
              scopes: k.scopes,
              expires_in: expiresIn,
            },
          }),
        );
      });
      if (rolled.error)
        return showKey(request, reply, rolled.error.status, { error: rolled.error.message });
      request.log.info(
        {
          event: 'api_key_rolled',
          appId: ctx.app.id,
          keyId: rolled.value.id,
          replacedKeyId: rolled.value.replaced.id,
        },
        'API key rolled',
      );
      return show(request, reply, 201, { created: rolled.value });
    },
  );

  app.post(`${APP_ROUTE}/keys/revoke`, change, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const keyId = field(asForm(request.body), 'key_id') ?? '';
    return postThenRedirect(reply, {
      run: async () => {
        const key = await permitKey(ctx, keyId);
        return audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () => keys.revoke(keyId, { appId: ctx.app.id }),
          () => ({
            action: 'key.revoked',
            target: key.id,
            details: { environment: key.environment, scopes: key.scopes, name: key.name },
          }),
        );
      },
      refused: (error) => show(request, reply, error.status, { error: error.message }),
      done: () => `${paths.keys(ctx.app.id)}?done=revoked`,
    });
  });
}
