/**
 * Sign-in and sign-out. The sign-in step (`attemptSignIn`) is shared by /login and by the
 * sign-in form of /oauth/authorize; it never says whether a username exists (one message,
 * the same password work either way). Its attempts are limited per IP by the rate limiter's
 * `sign-in` row, and its failures per client and username (login-throttle.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { UserRow } from '../db/schema.ts';
import { PASSWORD_MAX_LENGTH } from '../accounts/password-policy.ts';
import { CSRF_FIELD } from './csrf.ts';
import { asForm, field, safeReturnTo } from './forms.ts';
import { errorPage, html, htmlErrorHandler, sendPage, type Page, type SafeHtml } from './html.ts';

import { LOGIN_PATH, LOGOUT_PATH, siteNav, SIGNUP_PATH } from './site-nav.ts';

export { LOGIN_PATH, SIGNUP_PATH };
/** Where /login goes when it was not given somewhere to return to. */
const DEFAULT_AFTER_LOGIN = '/account/apps';

/** The one message for an unknown username and a wrong password. */
const BAD_CREDENTIALS = 'Incorrect username or password.';
export const FORM_EXPIRED =
  'This form has expired (or this browser blocks cookies). Please try again.';

export interface LoginView {
  /** Where the form posts (with its query string). */
  action: string;
  csrfToken: string;
  username?: string | undefined;
  error?: string | undefined;
  /** A line above the form, e.g. which app asks for the sign-in. */
  intro?: SafeHtml | undefined;
  /** A line below the form, e.g. where to create an account. */
  footer?: SafeHtml | undefined;
  hidden?: Readonly<Record<string, string>>;
}

export function loginPage(view: LoginView): Page {
  const hidden = Object.entries(view.hidden ?? {});
  return {
    title: 'Sign in',
    nav: siteNav(null),
    body: html`<section class="card">
<h1>Sign in</h1>
${view.intro ?? ''}
${view.error ? html`<p class="alert" role="alert">${view.error}</p>` : ''}
<form method="post" action="${view.action}">
<input type="hidden" name="${CSRF_FIELD}" value="${view.csrfToken}">
${hidden.map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">\n`)}
<label for="username">Username</label>
<input type="text" id="username" name="username" value="${view.username ?? ''}" autocomplete="username" autocapitalize="none" spellcheck="false" required maxlength="30">
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required maxlength="${PASSWORD_MAX_LENGTH}">
<div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>
${view.footer ?? ''}
</section>`,
  };
}

export type SignInResult =
  | { ok: true; user: UserRow }
  | { ok: false; statusCode: number; error: string; username?: string | undefined };

/** The sign-in step: CSRF, failed sign-in counters, credentials, then a fresh session cookie. */
export async function attemptSignIn(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<SignInResult> {
  const form = asForm(request.body);
  const username = field(form, 'username')?.trim();
  const password = field(form, 'password');
  if (!app.web.verifyCsrf(request, field(form, CSRF_FIELD)))
    return { ok: false, statusCode: 403, error: FORM_EXPIRED, username };
  if (!username || !password)
    return { ok: false, statusCode: 400, error: 'Enter your username and password.', username };

  const client = { ip: request.ip, knownBrowser: app.web.knownBrowser(request, username) };
  const history = { ip: request.ip, userAgent: request.headers['user-agent'] ?? null };
  const verdict = await app.web.throttle.attempt(client, username);
  if (!verdict.allowed) {
    await app.services.users.recordSignIn(username, 'throttled', history);
    reply.header('retry-after', String(verdict.retryAfterSeconds));
    const minutes = Math.ceil(verdict.retryAfterSeconds / 60);
    return {
      ok: false,
      statusCode: 429,
      error: `Too many sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
      username,
    };
  }
  const user =
    password.length <= PASSWORD_MAX_LENGTH
      ? await app.services.users.verifyCredentials(username, password)
      : null;
  if (!user) {
    await app.web.throttle.recordFailure(client, username);
    await app.services.users.recordSignIn(username, 'failed', history);
    request.log.info({ event: 'sign_in_failed' }, 'sign-in failed');
    return { ok: false, statusCode: 401, error: BAD_CREDENTIALS, username };
  }
  await app.web.throttle.recordSuccess(client, username);
  await app.services.users.recordSignIn(user.username, 'succeeded', history);
  await app.web.startSession(request, reply, user);
  app.web.rememberBrowser(request, reply, user.username);
  return { ok: true, user };
}

/** GET/POST /login and POST /logout. */
export function registerLoginRoutes(app: FastifyInstance): void {
  const showLogin = (
    request: FastifyRequest,
    reply: FastifyReply,
    returnTo: string,
    status = 200,
    error?: string,
    username?: string,
  ) =>
    sendPage(
      reply,
      status,
      loginPage({
        action: LOGIN_PATH,
        csrfToken: app.web.csrfToken(request, reply),
        error,
        username,
        hidden: { return_to: returnTo },
        footer: html`<p class="muted">New here? <a href="${SIGNUP_PATH}?return_to=${encodeURIComponent(returnTo)}">Create an account</a></p>`,
      }),
    );

  app.get<{ Querystring: { return_to?: string } }>(
    LOGIN_PATH,
    { errorHandler: htmlErrorHandler },
    async (request, reply) => {
      const returnTo = safeReturnTo(
        typeof request.query.return_to === 'string' ? request.query.return_to : undefined,
        DEFAULT_AFTER_LOGIN,
      );
      if (await app.web.currentUser(request)) return reply.redirect(returnTo, 303);
      return showLogin(request, reply, returnTo);
    },
  );

  app.post(
    LOGIN_PATH,
    { errorHandler: htmlErrorHandler, config: { formBody: true, signInForm: true } },
    async (request, reply) => {
      const returnTo = safeReturnTo(field(asForm(request.body), 'return_to'), DEFAULT_AFTER_LOGIN);
      const result = await attemptSignIn(app, request, reply);
      if (result.ok) return reply.redirect(returnTo, 303);
      return showLogin(request, reply, returnTo, result.statusCode, result.error, result.username);
    },
  );

  app.post(
    LOGOUT_PATH,
    { errorHandler: htmlErrorHandler, config: { formBody: true } },
    async (request, reply) => {
      const form = asForm(request.body);
      if (!app.web.verifyCsrf(request, field(form, CSRF_FIELD))) {
        return sendPage(reply, 403, errorPage(request, 'Sign-out failed', FORM_EXPIRED));
      }
      await app.web.endSession(request, reply);
      return reply.redirect(safeReturnTo(field(form, 'return_to'), LOGIN_PATH), 303);
    },
  );
}

/** The "Signed in as … / Sign out" line of the pages that need a session. */
export function signedInAs(user: UserRow, csrfToken: string, returnTo: string): SafeHtml {
  return html`<div class="signed-in">
<p class="muted">Signed in as <strong>${user.displayName}</strong> (@${user.username})</p>
<form class="inline" method="post" action="${LOGOUT_PATH}">
<input type="hidden" name="${CSRF_FIELD}" value="${csrfToken}">
<input type="hidden" name="return_to" value="${returnTo}">
<button type="submit" class="link">Sign out</button>
</form>
</div>`;
}
