/**
 * The portal's front door: the landing page and sign-up. Signing in and out are the shared
 * /login and /logout (src/web/login.ts): one session for the portal and the OAuth pages.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../accounts/password-policy.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { asForm, field, safeReturnTo } from '../web/forms.ts';
import { html, sendPage } from '../web/html.ts';
import { FORM_EXPIRED, LOGIN_PATH } from '../web/login.ts';
import { attempt } from './context.ts';
import { csrfInput, publicPage } from './layout.ts';
import { paths, ROUTES } from './paths.ts';

interface SignUpValues {
  username?: string | undefined;
  display_name?: string | undefined;
  email?: string | undefined;
}

function landingBody() {
  return html`<section class="hero">
<h1>Marketplace developer portal</h1>
<p>Build on the Marketplace listings API. Here you create apps and API keys, register OAuth
redirect URIs, configure webhook endpoints, follow your app's go-live checklist and look at the
listings you made in the sandbox.</p>
<ol class="steps">
<li>Create an account (a username and a password).</li>
<li>Create an app and a <strong>sandbox key</strong>.</li>
<li>Run the <code>curl</code> line the portal shows: your first sandbox listing appears in the inventory.</li>
</ol>
<div class="actions">
<a class="button primary" href="${paths.signup}">Create an account</a>
<a class="button" href="${LOGIN_PATH}?return_to=${encodeURIComponent(paths.apps)}">Sign in</a>
</div>
</section>`;
}

function signUpBody(csrfToken: string, returnTo: string, values: SignUpValues) {
  return html`<section class="card narrow">
<h1>Create an account</h1>
<form method="post" action="${paths.signup}">
${csrfInput(csrfToken)}
<input type="hidden" name="return_to" value="${returnTo}">
<label for="username">Username</label>
<p class="hint" id="username-hint">3 to 30 characters: lowercase letters, digits and _.</p>
<input type="text" id="username" name="username" value="${values.username ?? ''}" required minlength="3" maxlength="30"
  pattern="[a-z0-9_]{3,30}" autocomplete="username" autocapitalize="none" spellcheck="false" aria-describedby="username-hint">
<label for="display_name">Display name <span class="optional">(optional)</span></label>
<input type="text" id="display_name" name="display_name" value="${values.display_name ?? ''}" maxlength="80" autocomplete="name">
<label for="email">Email <span class="optional">(optional)</span></label>
<input type="email" id="email" name="email" value="${values.email ?? ''}" maxlength="254" autocomplete="email">
<label for="password">Password</label>
<p class="hint" id="password-hint">At least ${PASSWORD_MIN_LENGTH} characters. A few unrelated words make a strong password; common passwords and your username are refused.</p>
<input type="password" id="password" name="password" required minlength="${PASSWORD_MIN_LENGTH}" maxlength="${PASSWORD_MAX_LENGTH}"
  autocomplete="new-password" aria-describedby="password-hint">
<div class="actions"><button type="submit" class="primary">Create account</button></div>
</form>
<p class="muted">Already have an account? <a href="${LOGIN_PATH}?return_to=${encodeURIComponent(returnTo)}">Sign in</a></p>
</section>`;
}

export function registerAccountPages(app: FastifyInstance): void {
  const showSignUp = (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    returnTo: string,
    values: SignUpValues,
    error?: string,
  ) =>
    sendPage(
      reply,
      status,
      publicPage({
        title: 'Create an account',
        error,
        body: signUpBody(app.web.csrfToken(request, reply), returnTo, values),
      }),
    );

  app.get(ROUTES.home, async (request, reply) => {
    if (await app.web.currentUser(request)) return reply.redirect(paths.apps, 303);
    return sendPage(reply, 200, publicPage({ title: 'Developer portal', body: landingBody() }));
  });

  app.get<{ Querystring: { return_to?: string } }>(ROUTES.signup, async (request, reply) => {
    const returnTo = safeReturnTo(
      typeof request.query.return_to === 'string' ? request.query.return_to : undefined,
      paths.apps,
    );
    if (await app.web.currentUser(request)) return reply.redirect(returnTo, 303);
    return showSignUp(request, reply, 200, returnTo, {});
  });

  /**
   * Creates the account through UsersService (the CLI's `user create`), then signs the browser
   * in. Per IP, sign-ups count with the sign-in attempts (the rate limiter's `sign-in` row).
   */
  const signUp = { config: { formBody: true, signInForm: true } };
  app.post(ROUTES.signup, signUp, async (request, reply) => {
    const form = asForm(request.body);
    const returnTo = safeReturnTo(field(form, 'return_to'), paths.apps);
    const values: SignUpValues = {
      username: field(form, 'username')?.trim(),
      display_name: field(form, 'display_name')?.trim() || undefined,
      email: field(form, 'email')?.trim() || undefined,
    };
    if (!app.web.verifyCsrf(request, field(form, CSRF_FIELD)))
      return showSignUp(request, reply, 403, returnTo, values, FORM_EXPIRED);
    const created = await attempt(() =>
      app.services.users.create({
        username: values.username ?? '',
        password: field(form, 'password') ?? '',
        displayName: values.display_name,
        email: values.email,
      }),
    );
    if (created.error)
      return showSignUp(
        request,
        reply,
        created.error.status,
        returnTo,
        values,
        created.error.message,
      );
    request.log.info({ event: 'portal_sign_up', userId: created.value.id }, 'account created');
    await app.web.startSession(request, reply, created.value);
    app.web.rememberBrowser(request, reply, created.value.username);
    return reply.redirect(returnTo, 303);
  });
}
