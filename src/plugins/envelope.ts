/**
 * The response envelope and the API's error handler (the OpenAPI document's "Errors").
 * Every error of an API operation, whether thrown by our code or by Fastify, is mapped once
 * (src/failures.ts) and leaves through here as { error: { code, message, details? }, meta }.
 * 5xx bodies never carry internals.
 */
import { redactUrl } from '../lib/redact.ts';
import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { errorObject, NotFoundError, ValidationError, type ApiError } from '../errors.ts';
import type { Environment, ErrorResponse, Meta } from '../generated/schemas.ts';
import { methodNotAllowed } from '../lib/allowed-methods.ts';
import { RETRY_AFTER_503_SECONDS, toApiError } from '../failures.ts';
import { withoutStack } from '../lib/logging.ts';
import { recordSentError } from '../lib/sent-errors.ts';
import { claimedEnvironment } from './auth.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The success envelope's meta for this request, with optional extra fields. */
    meta<T extends Record<string, unknown>>(extra?: T): Meta & T;
  }
}

/**
 * The caller's environment, as the auth hook set it (for a failed credential, the one its prefix
 * claims); live before or without one.
 */
function environmentOf(request: FastifyRequest): Environment {
  return request.caller?.environment ?? 'live';
}

function metaOf(request: FastifyRequest, environment = environmentOf(request)): Meta {
  return { version: 'v1', environment, request_id: request.id };
}

function errorBody(
  request: FastifyRequest,
  error: ApiError,
  environment = environmentOf(request),
): ErrorResponse {
  const body = errorObject(error, request.id);
  recordSentError(request, body);
  return { error: body, meta: metaOf(request, environment) };
}

/**
 * Errors the router raises before any hook runs (a path parameter over its length limit,
 * broken percent-encoding): the same envelope, built without the request decorators.
 */
export function frameworkErrors(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const mapped = toApiError(error);
  // Whatever else the router may raise is about the URL path, never our fault.
  const apiError =
    mapped.statusCode < 500 ? mapped : ValidationError.field('/path', 'is not a valid URL path');
  reply
    .header('x-request-id', request.id)
    .code(apiError.statusCode)
    .type('application/json; charset=utf-8')
    // No hook has run, so no credential was read: the environment its prefix claims.
    .send(
      JSON.stringify(
        errorBody(request, apiError, claimedEnvironment(request.headers.authorization)),
      ),
    );
}

/** The id of a request: `meta.request_id` and the X-Request-Id header (Fastify's genReqId). */
export function newRequestId(): string {
  return `req_${randomUUID().replaceAll('-', '')}`;
}

/** Node's parser errors about the header section (llhttp codes), as opposed to the request line. */
const HEADER_PARSE_ERROR = /HEADER|CONTENT_LENGTH|TRANSFER_ENCODING/;

/**
 * What a request that Node could not parse gets: its status and the validation error saying why.
 */
function clientErrorOf(err: NodeJS.ErrnoException & { reason?: string }): {
  status: number;
  error: ValidationError;
} {
  const refused = (path: string, problem: string, message: string) =>
    new ValidationError(message, [{ path, message: problem }]);
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return {
      status: 408,
      error: refused(
        '',
        'did not arrive in time',
        'The request did not arrive completely in time.',
      ),
    };
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    const limit = `${maxHeaderSize / 1024} KiB`;
    return {
      status: 431,
      error: refused(
        '/headers',
        `are larger than ${limit} in total`,
        `The request headers are larger than ${limit} in total.`,
      ),
    };
  }
  // llhttp's reason ("Invalid header token") names the problem and holds none of the request's
  // bytes.
  const reason = err.reason ? ` (${err.reason})` : '';
  if (HEADER_PARSE_ERROR.test(err.code ?? '')) {
    return {
      status: 400,
      error: refused(
        '/headers',
        'hold a malformed header line',
        `A request header line is malformed${reason}.`,
      ),
    };
  }
  return {
    status: 400,
    error: refused(
      '',
      'is not a valid HTTP/1.1 request',
      `The request is not valid HTTP/1.1${reason}.`,
    ),
  };
}

/**
 * Fastify's clientErrorHandler: Node answers a request it cannot parse (a malformed header
 * line, an oversized header section, a request that is too slow) on the socket, before any
 * route or hook. The answer is the error envelope with its X-Request-Id (OpenAPI "Errors"), not
 * Node's or Fastify's default body; the request id is logged with Node's reason, never with
 * the raw bytes (they hold the Authorization header).
 */
export function clientErrors(
  this: FastifyInstance,
  err: NodeJS.ErrnoException,
  socket: Socket,
): void {
  // A reset connection has nobody to answer (https://nodejs.org/api/http.html#event-clienterror).
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const requestId = newRequestId();
  const { status, error } = clientErrorOf(err);
  this.log.info({ reqId: requestId, reason: err.code, status }, 'unparsable request refused');
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // Answered before any routing, so before any credential is read: `live`, as the document says.
  const body = JSON.stringify({
    error: errorObject(error, requestId),
    meta: { version: 'v1', environment: 'live', request_id: requestId },
  } satisfies ErrorResponse);
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${requestId}`,
    'connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}

/** The 405 of a path of the document, or the 404 of a URL that is none of them. */
function noRoute(request: FastifyRequest): Error {
  return (
    methodNotAllowed(request.method, request.url) ??
    // The path as every log writes it (src/lib/redact.ts): this message is logged too.
    new NotFoundError(`No route for ${request.method} ${redactUrl(request.url.split('?')[0]!)}.`)
  );
}

export default fp(
  async function envelope(app: FastifyInstance) {
    app.decorateRequest(
      'meta',
      function meta(this: FastifyRequest, extra?: Record<string, unknown>) {
        return { ...metaOf(this), ...extra } as never;
      },
    );

    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      done();
    });

    app.setErrorHandler(
      async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
        const apiError = toApiError(error);
        // A 503 is an overload (a search shed, a full pool) or an outage, never a bug: logged
        // as what it is, without a stack (withoutStack says why); a 500's error whole.
        if (apiError.statusCode === 503)
          request.log.warn({ err: withoutStack(error) }, 'backing service unavailable');
        else if (apiError.statusCode >= 500) request.log.error({ err: error }, 'request failed');
        reply.headers(apiError.headers);
        // Every 503 says when to come back (the document's ServiceUnavailable response).
        if (apiError.statusCode === 503 && !reply.hasHeader('retry-after'))
          reply.header('retry-after', RETRY_AFTER_503_SECONDS);
        return reply
          .code(apiError.statusCode)
          .type('application/json; charset=utf-8')
          .send(errorBody(request, apiError));
      },
    );

    // No route: a 405 on a path of the document, else a 404, decided before a body is read
    // (the preParsing hook), so that a method's body rules (QUERY's required Content-Type, a
    // JSON body's parsing) never answer for a route that does not exist.
    app.addHook('preParsing', (request, _reply, payload, done) => {
      if (!request.is404) return done(null, payload);
      done(noRoute(request));
    });
    app.setNotFoundHandler(async (request: FastifyRequest) => {
      throw noRoute(request);
    });
  },
  { name: 'envelope', fastify: '5.x', dependencies: ['validation'] },
);
