/**
 * The site's header navigation, one for every page (the portal, /login, the consent page,
 * /account/apps, the 404 page): signed in, the apps, the user and sign-out; signed out, sign-up
 * and sign-in. Pages put it in `Page.nav`.
 */
import { CSRF_FIELD } from './csrf.ts';
import { html, type SafeHtml } from './html.ts';

export const LOGIN_PATH = '/login';
export const LOGOUT_PATH = '/logout';
/** Where a newcomer creates an account (the developer portal's sign-up page). */
export const SIGNUP_PATH = '/portal/signup';
/** The signed-in home: the list of the user's apps. */
const APPS_PATH = '/portal/apps';
export const ACCOUNT_APPS_PATH = '/account/apps';

export function siteNav(who: { username: string; csrfToken: string } | null): SafeHtml {
  if (!who)
    return html`<nav class="site-nav" aria-label="Site">
<a href="${SIGNUP_PATH}">Create an account</a>
<a href="${LOGIN_PATH}?return_to=${encodeURIComponent(APPS_PATH)}">Sign in</a>
</nav>`;
  return html`<nav class="site-nav" aria-label="Site">
<a href="${APPS_PATH}">Your apps</a>
<a href="${ACCOUNT_APPS_PATH}">Authorized apps</a>
<span class="who">@${who.username}</span>
<form class="inline" method="post" action="${LOGOUT_PATH}">
<input type="hidden" name="${CSRF_FIELD}" value="${who.csrfToken}">
<input type="hidden" name="return_to" value="/portal">
<button type="submit" class="link">Sign out</button>
</form>
</nav>`;
}
