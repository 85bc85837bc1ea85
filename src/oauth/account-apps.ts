/**
 * /account/apps: the apps a signed-in user has authorized, each with a button that removes
 * its access (every grant of the user for that app, and every token under them).
 */
import type { FastifyInstance } from 'fastify';
import { SCOPE_WORDS } from '../oauth/scopes.ts';
import type { Scope } from '../access.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { asForm, field } from '../web/forms.ts';
import { errorPage, html, htmlErrorHandler, sendPage } from '../web/html.ts';
import { FORM_EXPIRED, LOGIN_PATH, signedInAs } from '../web/login.ts';

import { ACCOUNT_APPS_PATH, siteNav } from '../web/site-nav.ts';

export { ACCOUNT_APPS_PATH };
const REVOKE_PATH = `${ACCOUNT_APPS_PATH}/revoke`;
const loginFirst = `${LOGIN_PATH}?return_to=${encodeURIComponent(ACCOUNT_APPS_PATH)}`;

const dateFormat = new Intl.DateTimeFormat('en', { dateStyle: 'medium', timeZone: 'UTC' });

export function registerAccountAppsRoutes(app: FastifyInstance): void {
  app.get<{ Querystring: { revoked?: string } }>(
    ACCOUNT_APPS_PATH,
    { errorHandler: htmlErrorHandler },
    async (request, reply) => {
      const user = await app.web.currentUser(request);
      if (!user) return reply.redirect(loginFirst, 303);
      const apps = await app.services.oauth.authorizedApps(user.id);
      const csrfToken = app.web.csrfToken(request, reply);
      return sendPage(reply, 200, {
        title: 'Authorized apps',
        nav: siteNav({ username: user.username, csrfToken }),
        body: html`<section class="card">
<h1>Authorized apps</h1>
${request.query.revoked === '1' ? html`<p class="notice" role="status">The app's access was removed. Its tokens no longer work.</p>` : ''}
${
  apps.length === 0
    ? html`<p>No app can use your account.</p>`
    : html`<p>These apps can use your Marketplace account. Removing access signs the app out at once.</p>
<ul class="apps">
${apps.map(
  (a) => html`<li>
<h2>${a.name}</h2>
<p class="muted">Made by @${a.ownerUsername} · authorized ${dateFormat.format(a.authorizedAt)} (UTC)</p>
<ul class="scopes">${a.scopes.map((s) => html`<li>${SCOPE_WORDS[s as Scope] ?? s}</li>`)}</ul>
<form method="post" action="${REVOKE_PATH}">
<input type="hidden" name="${CSRF_FIELD}" value="${csrfToken}">
<input type="hidden" name="app_id" value="${a.appId}">
<button type="submit" class="danger" aria-label="Remove access of ${a.name}">Remove access</button>
</form>
</li>
`,
)}
</ul>`
}
${signedInAs(user, csrfToken, ACCOUNT_APPS_PATH)}
</section>`,
      });
    },
  );

  app.post(
    REVOKE_PATH,
    { errorHandler: htmlErrorHandler, config: { formBody: true } },
    async (request, reply) => {
      const user = await app.web.currentUser(request);
      if (!user) return reply.redirect(loginFirst, 303);
      const form = asForm(request.body);
      if (!app.web.verifyCsrf(request, field(form, CSRF_FIELD))) {
        return sendPage(reply, 403, errorPage(request, 'Access was not removed', FORM_EXPIRED));
      }
      await app.services.oauth.revokeApp(user.id, field(form, 'app_id') ?? '');
      return reply.redirect(`${ACCOUNT_APPS_PATH}?revoked=1`, 303);
    },
  );
}
