/**
 * /account/apps: the apps a signed-in user has authorized, each with a button that removes
 * its access (every grant of the user for that app, and every token under them); and the
 * account's recent sign-ins (time, client IP, user agent, outcome), as UsersService keeps them.
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

const SIGN_IN_WORDS = {
  succeeded: 'Signed in',
  failed: 'Wrong password',
  throttled: 'Refused: too many attempts',
} as const;

const dateFormat = new Intl.DateTimeFormat('en', { dateStyle: 'medium', timeZone: 'UTC' });

export function registerAccountAppsRoutes(app: FastifyInstance): void {
  app.get<{ Querystring: { revoked?: string } }>(
    ACCOUNT_APPS_PATH,
    { errorHandler: htmlErrorHandler },
    async (request, reply) => {
      const user = await app.web.currentUser(request);
      if (!user) return reply.redirect(loginFirst, 303);
      const [apps, signIns] = await Promise.all([
        app.services.oauth.authorizedApps(user.id),
        app.services.users.signIns(user.id),
      ]);
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
</section>
<section class="card" aria-labelledby="sign-ins-heading">
<h2 id="sign-ins-heading">Recent sign-ins</h2>
<p>The last sign-ins to your account, newest first. One you do not recognise: change your password.</p>
<div class="table-wrap" tabindex="0" role="region" aria-label="Recent sign-ins"><table>
<caption class="visually-hidden">Recent sign-ins</caption>
<thead><tr><th scope="col">When (UTC)</th><th scope="col">Outcome</th><th scope="col">IP address</th><th scope="col">Browser</th></tr></thead>
<tbody>
${signIns.map(
  (s) => html`<tr>
<td><time datetime="${s.at}">${s.at.slice(0, 16).replace('T', ' ')}</time></td>
<td>${SIGN_IN_WORDS[s.outcome]}</td>
<td>${s.ip ?? ''}</td>
<td>${s.user_agent ?? ''}</td>
</tr>`,
)}
</tbody>
</table></div>
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
