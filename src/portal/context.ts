/**
 * What every signed-in portal page knows about its request: the user (from the shared
 * sign-in session), the app of the URL once its ownership was checked (AppsService.getOwned),
 * and the CSRF token of the page's forms. Set by the portal's preHandler (portal-routes.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { UserRow } from '../db/schema.ts';
import type { AppRow } from '../db/schema.ts';
import { ApiError, InternalError } from '../errors.ts';
import type { EndpointDetails } from '../webhooks/endpoint-views.ts';

type OwnedApp = AppRow & { ownerUsername: string };

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
