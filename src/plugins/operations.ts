/**
 * Binds handlers to the OpenAPI document's operations by operationId. The document's
 * method, path, schemas and security requirements come from the generated operations;
 * an operation without a handler stops the boot, unless it is listed as pending.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, onRequestHookHandler, RouteHandlerMethod } from 'fastify';
import { operations, type OperationId } from '../generated/operations.ts';
import { methodNotAllowed, shadowedRoutes } from '../lib/allowed-methods.ts';
import type { Handler, Handlers, OwnErrorFormat } from '../lib/handlers.ts';
import { authorize, type SecurityRequirements } from './auth.ts';

type Operations = typeof operations;

/** Schemes whose credentials come as Bearer tokens, resolved by the auth plugin's hook. */
const BEARER_SCHEMES = new Set(['apiKey', 'oauth2']);

function usesBearer(security: SecurityRequirements): boolean {
  return security.some((requirement) =>
    Object.keys(requirement).some((scheme) => BEARER_SCHEMES.has(scheme)),
  );
}

export class UnboundOperationError extends Error {
  override name = 'UnboundOperationError';
}

/**
 * Checks that handlers and the document agree: every operation handled or pending, nothing else.
 */
export function checkBindings(handlers: Handlers, pending: readonly OperationId[]): void {
  const problems: string[] = [];
  for (const [id, op] of Object.entries(operations) as [OperationId, Operations[OperationId]][]) {
    const handled = handlers[id] !== undefined;
    if (!handled && !pending.includes(id))
      problems.push(`${id} (${op.method} ${op.path}) has no handler`);
    if (handled && pending.includes(id))
      problems.push(`${id} is handled but still listed as pending`);
  }
  for (const id of Object.keys(handlers)) {
    if (!(id in operations)) problems.push(`handler ${id} matches no operation of the document`);
  }
  for (const id of pending)
    if (!(id in operations)) problems.push(`pending ${id} matches no operation of the document`);
  if (problems.length > 0)
    throw new UnboundOperationError(
      `OpenAPI document and handlers disagree: ${problems.join('; ')}`,
    );
}

/**
 * The operation's authorization, from what the auth hook decided (request.caller and
 * request.authFailure): a failed credential answers with its failure (401, or 503 when it
 * could not be checked), else the caller must meet the operation's security (401/403).
 */
function authorization(security: SecurityRequirements): onRequestHookHandler {
  return function authorization(request, _reply, done) {
    if (request.authFailure !== null) return done(request.authFailure);
    try {
      authorize(request.caller, security);
    } catch (err) {
      return done(err as Error);
    }
    done();
  };
}

export async function bindOperations(
  app: FastifyInstance,
  handlers: Handlers,
  pending: readonly OperationId[],
): Promise<void> {
  checkBindings(handlers, pending);
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  for (const [id, entry] of Object.entries(handlers) as [
    OperationId,
    Handler<OperationId> | OwnErrorFormat<OperationId>,
  ][]) {
    const { handler, errorHandler } =
      typeof entry === 'function' ? { handler: entry, errorHandler: undefined } : entry;
    const op = operations[id];
    const security = op.security as SecurityRequirements;
    const bearer = usesBearer(security);
    typed.route({
      method: op.method,
      url: op.url,
      schema: op.schema,
      config: { operationId: id, takesBearer: bearer },
      ...('bodyLimit' in op ? { bodyLimit: op.bodyLimit } : {}),
      ...(errorHandler ? { errorHandler } : {}),
      // Operations without a Bearer scheme have nothing to check here: their caller is anonymous.
      ...(bearer ? { onRequest: authorization(security) } : {}),
      handler: handler as RouteHandlerMethod,
    });
  }
  // A literal path answers every method, its own or a 405 (POST /listings/batch's path has no
  // GET, which the router would otherwise give to GET /listings/{id}).
  for (const { method, url } of shadowedRoutes())
    app.route({
      method,
      url,
      handler: async (request) => {
        throw methodNotAllowed(request.method, request.url);
      },
    });
}
