/**
 * The developer portal's routes (docs/portal.md). Everything under /portal is a page:
 * failures are pages too (never the API's JSON envelope), and none of it is in the OpenAPI
 * document. Signed-in pages pass one gate first (signedInGate): the shared session, the CSRF
 * token of every posted form, the user's membership of the app in the URL (read on every
 * request) and whether their role allows the route's `appAction` (src/access.ts).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { assertMayDo } from '../access.ts';
import { ForbiddenError, InternalError, NotFoundError, ValidationError } from '../errors.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { asForm, field } from '../web/forms.ts';
import {
  errorPage,
  html,
  htmlErrorHandler,
  sendErrorPage,
  sendPage,
  type SafeHtml,
} from '../web/html.ts';
import { FORM_EXPIRED, LOGIN_PATH } from '../web/login.ts';
import { registerAccountPages } from './account-pages.ts';
import { registerAppsPages } from './apps-pages.ts';
import { registerAuditPages } from './audit-pages.ts';
import { setPortalState } from './context.ts';
import { registerEventsPages } from './events-pages.ts';
import { registerInventoryPages } from './inventory-pages.ts';
import { registerKeysPages } from './keys-pages.ts';
import { registerLogsPages } from './logs-pages.ts';
import { registerMembersPages } from './members-pages.ts';
import { publicPage, userPage } from './layout.ts';
import { registerOAuthPages } from './oauth-pages.ts';
import { registerSavedSearchesPages } from './saved-searches-pages.ts';
import { registerSettingsPages } from './settings-pages.ts';
import { paths } from './paths.ts';
import { registerWebhooksPages } from './webhooks-pages.ts';

/**
 * A missing app, key, endpoint or delivery is one 404 page (another user's looks the same), with
 * the header of a signed-in user when there is one.
 */
async function sendNotFound(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const user = await app.web.currentUser(request).catch(() => null);
  const view = (next: SafeHtml) => ({
    title: 'Not found',
    body: html`<section class="card narrow">
<h1>Not found</h1>
<p>There is nothing here, or it belongs to another account.</p>
<p>${next}</p>
</section>`,
  });
  if (!user)
    return sendPage(
      reply,
      404,
      publicPage(
        view(
          html`<a href="${LOGIN_PATH}?return_to=${encodeURIComponent(paths.apps)}">Sign in</a> to see your apps.`,
        ),
      ),
    );
  const ctx = { user, csrfToken: app.web.csrfToken(request, reply) };
  return sendPage(
    reply,
    404,
    userPage(ctx, view(html`<a href="${paths.apps}">Go to your apps</a>`)),
  );
}

/** A plugin: the portal plugin registers it with the prefix PORTAL_PATH. */
export async function portalRoutes(app: FastifyInstance): Promise<void> {
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error instanceof NotFoundError) return sendNotFound(app, request, reply);
    // A role that may not (the gate, src/access.ts): the page says which role it needs.
    if (error instanceof ForbiddenError)
      return sendErrorPage(request, reply, error, error, error.message);
    return htmlErrorHandler(error, request, reply);
  });
  app.setNotFoundHandler(async (request, reply) => sendNotFound(app, request, reply));
  // Every page reads its query parameters as single texts (a filter, a cursor, a notice): one
  // given twice (`?path=/a&path=/b`) is a 400 page naming it, before any page reads it.
  app.addHook('preValidation', async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const repeated = Object.keys(query).find((name) => Array.isArray(query[name]));
    if (repeated === undefined) return;
    const failure = ValidationError.field(`/query/${repeated}`, 'is given more than once');
    return sendErrorPage(
      request,
      reply,
      failure,
      failure,
      `The link gives ${repeated} more than once.`,
    );
  });

  registerAccountPages(app);

  // The signed-in pages: one encapsulated scope behind the gate.
  await app.register(async (signedIn) => {
    // Every page and form of an app names what it does, or the server does not start.
    signedIn.addHook('onRoute', (route) => {
      if (route.url.includes(':appId') && route.config?.appAction === undefined)
        throw new InternalError(`portal route ${route.method} ${route.url} names no appAction`);
    });
    signedIn.addHook('preHandler', async (request, reply) => {
      const user = await app.web.currentUser(request);
      if (!user) {
        // After signing in, come back here (a form post comes back to the list of apps).
        const returnTo = request.method === 'GET' ? request.url : paths.apps;
        return reply.redirect(`${LOGIN_PATH}?return_to=${encodeURIComponent(returnTo)}`, 303);
      }
      if (
        request.method === 'POST' &&
        !app.web.verifyCsrf(request, field(asForm(request.body), CSRF_FIELD))
      ) {
        return sendPage(reply, 403, errorPage(request, 'This form has expired', FORM_EXPIRED));
      }
      const { appId } = (request.params ?? {}) as { appId?: string };
      const member =
        appId === undefined ? undefined : await app.services.apps.getAsMember(appId, user.id);
      const action = request.routeOptions.config.appAction;
      if (member && action) assertMayDo(member.role, action);
      const disabledEndpoints = member ? await app.services.endpoints.disabled(member.id) : [];
      setPortalState(request, { user, app: member, disabledEndpoints });
    });
    registerAppsPages(signedIn);
    registerKeysPages(signedIn);
    registerOAuthPages(signedIn);
    registerWebhooksPages(signedIn);
    registerEventsPages(signedIn);
    registerSavedSearchesPages(signedIn);
    registerLogsPages(signedIn);
    registerInventoryPages(signedIn);
    registerMembersPages(signedIn);
    registerAuditPages(signedIn);
    registerSettingsPages(signedIn);
  });
}
