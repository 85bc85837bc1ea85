/**
 * The typed handler of each operation of the document, as route files write them and
 * src/plugins/operations.ts binds them: a low module, so that the doors (route files) and the
 * binding plugin both import it and neither imports the other.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  ContextConfigDefault,
  FastifyError,
  FastifyReply,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
  RouteHandlerMethod,
} from 'fastify';
import type { operations, OperationId } from '../generated/operations.ts';

type Operations = typeof operations;

export type Handler<K extends OperationId> = RouteHandlerMethod<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  RouteGenericInterface,
  ContextConfigDefault,
  Operations[K]['schema'],
  TypeBoxTypeProvider
>;

/**
 * An operation that answers its own error format (an HTML page, a redirect, RFC 6749 JSON)
 * instead of the API envelope, for every failure of its route: schema validation, body
 * parsing, hooks and the handler (Fastify's route-level errorHandler).
 */
export interface OwnErrorFormat<K extends OperationId> {
  handler: Handler<K>;
  errorHandler: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => unknown;
}

export type Handlers = { [K in OperationId]?: Handler<K> | OwnErrorFormat<K> };
