/**
 * What every signed-in portal page knows about its request: the user (from the shared
 * sign-in session), the app of the URL with the user's role in it, read afresh for this request
 * (AppsService.getAsMember), and the CSRF token of the page's forms. Set by the portal's
 * preHandler (portal-routes.ts), which also checks the route's `appAction` against the role.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { assertMayDo, mayDo, type AppAction, type AppRole } from '../access.ts';
import type { AuditNote } from '../audit/audit-service.ts';
import type { UserRow } from '../db/schema.ts';
import type { AppRow } from '../db/schema.ts';
import { ApiError, InternalError } from '../errors.ts';
import type { EndpointDetails } from '../webhooks/endpoint-views.ts';

type OwnedApp = AppRow & { ownerUsername: string; role: AppRole };

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * What a page or form of an app does (src/access.ts APP_ACTIONS): every route under
     * /portal/apps/:appId names one, and the portal's gate refuses (403) a role that may not.
     */
    appAction?: AppAction;
  }
}

export interface PortalContext {
  user: UserRow;
  csrfToken: string;
}

export interface AppContext extends PortalContext {
  app: OwnedApp;
  /** The app's disabled webhook endpoints: a banner at the top of each of its pages. */
  disabledEndpoints: EndpointDetails[];
}

interface PortalState {
  user: UserRow;
  app?: OwnedApp | undefined;
  disabledEndpoints?: EndpointDetails[];
}

const states = new WeakMap<FastifyRequest, PortalState>();

export function setPortalState(request: FastifyRequest, state: PortalState): void {
  states.set(request, state);
}

export function portalContext(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): PortalContext {
  const state = states.get(request);
  if (!state) throw new InternalError('portal page without its signed-in state');
  return { user: state.user, csrfToken: app.web.csrfToken(request, reply) };
}

export function appContext(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): AppContext {
  const state = states.get(request);
  if (!state?.app) throw new InternalError('app page without its owned app');
  return {
    ...portalContext(app, request, reply),
    app: state.app,
    disabledEndpoints: state.disabledEndpoints ?? [],
  };
}

/** Whether the user's role on the page's app allows the action (what the page offers). */
export function may(ctx: AppContext, action: AppAction): boolean {
  return mayDo(ctx.app.role, action);
}

/**
 * 403 unless the user's role allows the action: for a form whose action depends on what it
 * changes (a live key or endpoint needs more than a sandbox one), called inside its service call.
 */
export function permit(ctx: AppContext, action: AppAction): void {
  assertMayDo(ctx.app.role, action);
}

/**
 * Runs a sensitive change of an app and records it in the app's audit log as the signed-in
 * user's, with the request's client IP and user agent, one unit of work (AuditService.audited):
 * a refusal throws and records nothing, and an entry that cannot be written undoes the change.
 * `work` runs in the unit's transaction: a check that is slow or external runs before this call.
 */
export function audited<T>(
  app: FastifyInstance,
  request: FastifyRequest,
  user: UserRow,
  /** The app changed; of the change's result where only it says (an invitation answered). */
  appId: string | ((value: T) => string),
  work: () => Promise<T>,
  note: (value: T) => AuditNote,
): Promise<T> {
  return app.services.audit.audited(
    {
      type: 'user',
      userId: user.id,
      username: user.username,
      ip: request.ip,
      userAgent: request.headers['user-agent'] ?? null,
    },
    work,
    (value) => ({ appId: typeof appId === 'string' ? appId : appId(value), ...note(value) }),
  );
}

/**
 * A refusal the page shows beside its form, with the service's own words and status: an
 * exposed 4xx (validation, forbidden, conflict, not found). Anything else is not a form error.
 */
export interface FormError {
  status: number;
  message: string;
}

function formError(err: unknown): FormError | null {
  if (err instanceof ApiError && err.expose && err.statusCode >= 400 && err.statusCode < 500) {
    return { status: err.statusCode, message: err.message };
  }
  return null;
}

/** Runs a service call; a refusal becomes { error } for the page, anything else is thrown on. */
export async function attempt<T>(
  work: () => Promise<T>,
): Promise<{ value: T; error?: undefined } | { value?: undefined; error: FormError }> {
  try {
    return { value: await work() };
  } catch (err) {
    const error = formError(err);
    if (!error) throw err;
    return { error };
  }
}
