/**
 * /oauth/authorize (RFC 6749 §4.1.1-4.1.2, RFC 7636 §4.3, docs/oauth.md).
 *
 * GET pipeline: check the client -> check the redirect URI (either failing: HTML 400 page,
 * never a redirect) -> check the rest of the request (failing: redirect with error,
 * error_description and state) -> sign-in page, or the consent page.
 * POST (the forms of those pages, same query string): the same checks, then either the
 * sign-in step or the decision: allow -> code and state, deny -> access_denied and state.
 * Redirects answering a form post are 303 See Other (RFC 9700: never 307, which would resend
 * the form, password included, to the client).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Scope } from '../access.ts';
import type { Handlers } from '../lib/handlers.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { asForm, field } from '../web/forms.ts';
import { sendErrorPage, sendPage } from '../web/html.ts';
import { attemptSignIn, FORM_EXPIRED, loginPage } from '../web/login.ts';
import {
  AccessDeniedError,
  InvalidRequestError,
  publicDescription,
  toOAuthError,
  UnsupportedResponseTypeError,
} from './oauth-errors.ts';
import type { OAuthClient, OAuthService } from './oauth-service.ts';
import { CODE_CHALLENGE_PATTERN } from './pkce.ts';
import { parseScopeParameter } from './scopes.ts';
import { consentPage, invalidClientPage, loginIntro } from './views.ts';

const AUTHORIZE_PATH = '/oauth/authorize';

type Query = Readonly<Record<string, unknown>>;

/**
 * A request whose client and redirect URI are known good: from here on, problems go back to the
 * client.
 */
interface VerifiedClient {
  client: OAuthClient;
  redirectUri: string;
  /** Echoed on every redirect (RFC 6749 §4.1.2); undefined when absent or unusable. */
  state: string | undefined;
}

interface AuthorizationRequest extends VerifiedClient {
  scopes: Scope[];
  codeChallenge: string | null;
}

/** A problem found before the redirect URI could be trusted: shown on our own page. */
class UntrustedRequest extends Error {}

/**
 * RFC 6749 §3.1: request parameters must not be repeated; a repeated or non-text one is unusable.
 */
function single(query: Query, name: string): string | undefined {
  const value = Object.hasOwn(query, name) ? query[name] : undefined;
  if (value === undefined) return undefined;
  if (typeof value !== 'string')
    throw new InvalidRequestError(`The parameter ${name} must be sent once.`);
  return value;
}

/**
 * Steps 1-2: the client_id names an app, and redirect_uri is one of its registered URIs, exactly.
 */
async function checkClient(oauth: OAuthService, query: Query): Promise<VerifiedClient> {
  const untrusted = (reason: string) => new UntrustedRequest(reason);
  const clientId = query.client_id;
  if (typeof clientId !== 'string' || clientId === '')
    throw untrusted('The request names no app (client_id is missing or repeated).');
  const client = await oauth.findClient(clientId);
  if (!client) throw untrusted('No app is registered with this client_id.');
  const redirectUri = query.redirect_uri;
  if (typeof redirectUri !== 'string' || redirectUri === '')
    throw untrusted('The request has no redirect_uri (or repeats it).');
  if (!client.redirectUris.includes(redirectUri))
    throw untrusted('The redirect_uri is not registered for this app.');
  const state = typeof query.state === 'string' ? query.state : undefined;
  return { client, redirectUri, state };
}

/** Step 3: response type, scope and PKCE; failures redirect to the client. */
function checkRequest(verified: VerifiedClient, query: Query): AuthorizationRequest {
  single(query, 'state');
  const responseType = single(query, 'response_type');
  if (responseType === undefined || responseType === '')
    throw new InvalidRequestError('The parameter response_type is missing.');
  if (responseType !== 'code')
    throw new UnsupportedResponseTypeError('Only response_type=code is supported.');
  const scopes = parseScopeParameter(single(query, 'scope'));
  const challenge = single(query, 'code_challenge');
  const method = single(query, 'code_challenge_method');
  if (method !== undefined && method !== 'S256') {
    throw new InvalidRequestError('Only code_challenge_method=S256 is supported.');
  }
  if (challenge === undefined && method !== undefined)
    throw new InvalidRequestError('code_challenge_method was sent without code_challenge.');
  if (challenge !== undefined && method === undefined) {
    throw new InvalidRequestError(
      'code_challenge needs code_challenge_method=S256 (plain is not supported).',
    );
  }
  if (challenge !== undefined && !CODE_CHALLENGE_PATTERN.test(challenge)) {
    throw new InvalidRequestError(
      'code_challenge must be 43 base64url characters (the S256 of the code_verifier).',
    );
  }
  return { ...verified, scopes, codeChallenge: challenge ?? null };
}

/** Appends the response parameters to the registered URI, keeping its own query as registered. */
function redirectUrl(redirectUri: string, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params))
    if (value !== undefined) query.append(name, value);
  return `${redirectUri}${redirectUri.includes('?') ? '&' : '?'}${query.toString()}`;
}

/** RFC 6749 §4.1.2.1: the error goes back to the client, in the redirect URI's query. */
function redirectWithError(
  reply: FastifyReply,
  verified: VerifiedClient,
  err: unknown,
  status: 302 | 303,
): FastifyReply {
  const error = toOAuthError(err);
  if (error.statusCode >= 500) reply.log.error({ err }, 'authorization request failed');
  const description = publicDescription(error, reply.request.id);
  return reply.header('cache-control', 'no-store').redirect(
    redirectUrl(verified.redirectUri, {
      error: error.error,
      error_description: description,
      state: verified.state,
    }),
    status,
  );
}

const queryOf = (request: FastifyRequest): Query => (request.query ?? {}) as Query;
/** Where the pages' forms post: this endpoint with the original query string. */
function actionOf(request: FastifyRequest): string {
  const queryStart = request.url.indexOf('?');
  return queryStart === -1 ? AUTHORIZE_PATH : `${AUTHORIZE_PATH}${request.url.slice(queryStart)}`;
}

/**
 * Runs steps 1-3. Answers by itself (HTML 400 page, or error redirect) and returns null when
 * the request cannot go on.
 */
async function verify(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  status: 302 | 303,
): Promise<AuthorizationRequest | null> {
  let verified: VerifiedClient;
  try {
    verified = await checkClient(app.services.oauth, queryOf(request));
  } catch (err) {
    if (err instanceof UntrustedRequest) {
      sendPage(reply, 400, invalidClientPage(request, err.message));
      return null;
    }
    throw err;
  }
  try {
    return checkRequest(verified, queryOf(request));
  } catch (err) {
    redirectWithError(reply, verified, err, status);
    return null;
  }
}

function showLogin(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  auth: AuthorizationRequest,
  status = 200,
  error?: string,
  username?: string,
) {
  return sendPage(
    reply,
    status,
    loginPage({
      action: actionOf(request),
      csrfToken: app.web.csrfToken(request, reply),
      intro: loginIntro(auth.client),
      error,
      username,
    }),
  );
}

async function showConsent(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  auth: AuthorizationRequest,
  status = 200,
  error?: string,
) {
  const user = await app.web.currentUser(request);
  if (!user) return showLogin(app, request, reply, auth);
  return sendPage(
    reply,
    status,
    consentPage({
      client: auth.client,
      user,
      scopes: auth.scopes,
      redirectUri: auth.redirectUri,
      action: actionOf(request),
      csrfToken: app.web.csrfToken(request, reply),
      error,
    }),
  );
}

/** GET: the sign-in page without a session, else the consent page (shown on every request). */
async function authorizeGet(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const auth = await verify(app, request, reply, 302);
  if (!auth) return reply;
  try {
    return await showConsent(app, request, reply, auth);
  } catch (err) {
    return redirectWithError(reply, auth, err, 302);
  }
}

/** POST: the sign-in form (no `decision` field) or the consent form. */
async function authorizePost(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const auth = await verify(app, request, reply, 303);
  if (!auth) return reply;
  const form = asForm(request.body);
  const decision = field(form, 'decision');
  if (decision === undefined) {
    const result = await attemptSignIn(app, request, reply);
    // Post/redirect/get: the consent page is then loaded with GET, from the same query.
    if (result.ok) return reply.redirect(actionOf(request), 303);
    return showLogin(app, request, reply, auth, result.statusCode, result.error, result.username);
  }

  const user = await app.web.currentUser(request);
  if (!user)
    return showLogin(
      app,
      request,
      reply,
      auth,
      401,
      'Your session has ended. Please sign in again.',
    );
  if (!app.web.verifyCsrf(request, field(form, CSRF_FIELD)))
    return showConsent(app, request, reply, auth, 403, FORM_EXPIRED);
  if (decision === 'deny') {
    return redirectWithError(
      reply,
      auth,
      new AccessDeniedError('The user denied the request.'),
      303,
    );
  }
  if (decision !== 'allow')
    return showConsent(app, request, reply, auth, 400, 'Choose Allow or Deny.');
  try {
    const code = await app.services.oauth.issueCode({
      clientId: auth.client.id,
      userId: user.id,
      redirectUri: auth.redirectUri,
      scopes: auth.scopes,
      codeChallenge: auth.codeChallenge,
    });
    return reply
      .header('cache-control', 'no-store')
      .redirect(redirectUrl(auth.redirectUri, { code, state: auth.state }), 303);
  } catch (err) {
    return redirectWithError(reply, auth, err, 303);
  }
}

/**
 * Failures before the client is verified cannot be redirected: an HTML page (500, or 503
 * when the database is down). A schema validation failure of the query is not an answer by
 * itself: the pipeline checks each parameter in the order the rules above give.
 */
function authorizeErrorHandler(app: FastifyInstance) {
  return async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (error.validation && request.method === 'GET') {
      try {
        return await authorizeGet(app, request, reply);
      } catch (err) {
        error = err as FastifyError;
      }
    }
    // The page speaks to the user, not the client: RFC 6749 codes stay out of it, and any
    // client error of the request is a 400 page.
    const { statusCode } = toOAuthError(error);
    const status = statusCode === 429 || statusCode >= 500 ? statusCode : 400;
    return sendErrorPage(
      request,
      reply,
      { statusCode: status },
      error,
      'Please go back to the app and try again.',
    );
  };
}

export function authorizeHandlers(app: FastifyInstance): Handlers {
  return {
    authorize: {
      errorHandler: authorizeErrorHandler(app),
      // Resolves to nothing: the page or redirect is sent by authorizeGet. (The operation's
      // documented 408 is JSON, so returning the reply would not type-check as an answer.)
      handler: async (request, reply) => {
        await authorizeGet(app, request, reply);
      },
    },
  };
}

/** The form posts of the sign-in and consent pages (not part of the API document). */
export function registerAuthorizeFormRoute(app: FastifyInstance): void {
  app.post(
    AUTHORIZE_PATH,
    // The sign-in form of the flow (the consent decision, on the same URL, is no attempt).
    { config: { formBody: true, signInForm: true }, errorHandler: authorizeErrorHandler(app) },
    (request, reply) => authorizePost(app, request, reply),
  );
}
