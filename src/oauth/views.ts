/** The pages of /oauth/authorize: the consent form and the "this link is not valid" page. */
import type { FastifyRequest } from 'fastify';
import type { UserRow } from '../db/schema.ts';
import type { Scope } from '../access.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { html, type Page } from '../web/html.ts';
import { signedInAs } from '../web/login.ts';
import { siteNav } from '../web/site-nav.ts';
import { ACCOUNT_APPS_PATH } from './account-apps.ts';
import type { OAuthClient } from './oauth-service.ts';
import { SCOPE_WORDS } from './scopes.ts';

export interface ConsentView {
  client: OAuthClient;
  user: UserRow;
  scopes: readonly Scope[];
  redirectUri: string;
  /** The form's action: /oauth/authorize with the original query. */
  action: string;
  csrfToken: string;
  error?: string | undefined;
}

/**
 * RFC 6749 §10.2-10.3: the user sees who asks, who made the app, what it may do and where they go
 * next.
 */
export function consentPage(view: ConsentView): Page {
  const { client, user } = view;
  const destination = new URL(view.redirectUri);
  return {
    title: `Authorize ${client.name}`,
    nav: siteNav({ username: user.username, csrfToken: view.csrfToken }),
    formActionOrigins: [destination.origin],
    body: html`<section class="card">
<h1>Authorize ${client.name}</h1>
${view.error ? html`<p class="alert" role="alert">${view.error}</p>` : ''}
<p><strong>${client.name}</strong>, an app made by ${client.ownerDisplayName} (@${client.ownerUsername}), wants to use your Marketplace account.</p>
<h2 id="scopes-heading">If you allow it, it will be able to:</h2>
<ul class="scopes" aria-labelledby="scopes-heading">
${view.scopes.map((scope) => html`<li>${SCOPE_WORDS[scope]}</li>\n`)}
</ul>
<p class="muted">It acts as you on the live marketplace for up to 30 days. You can remove its access at any time under <a href="${ACCOUNT_APPS_PATH}">Authorized apps</a>. After you choose, you will go back to ${destination.host}.</p>
<form method="post" action="${view.action}">
<input type="hidden" name="${CSRF_FIELD}" value="${view.csrfToken}">
<div class="actions">
<button type="submit" name="decision" value="allow" class="primary">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>
${signedInAs(user, view.csrfToken, view.action)}
</section>`,
  };
}

/**
 * Unknown client or unregistered redirect URI: nothing can be sent back, so the user is told here.
 */
export function invalidClientPage(request: FastifyRequest, reason: string): Page {
  return {
    title: 'Authorization error',
    body: html`<section class="card">
<h1>This link is not valid</h1>
<p>${reason}</p>
<p>The app that sent you here is misconfigured. You can close this page; nothing was shared.</p>
<p class="muted">Request id ${request.id}</p>
</section>`,
  };
}

export function loginIntro(client: OAuthClient) {
  return html`<p>Sign in to continue to <strong>${client.name}</strong>.</p>`;
}
