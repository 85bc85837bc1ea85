/**
 * OAuth 2.0 errors: one class per error code of RFC 6749 (§4.1.2.1 for the authorization
 * endpoint, §5.2 for the token endpoint) and RFC 7009, each with its HTTP status. Code throws
 * these; `sendOAuthError` is the one place that writes `{ error, error_description }` with
 * `Cache-Control: no-store`, and `toOAuthError` turns anything else (mapped once by
 * src/failures.ts: schema validation, body parsing, database failures) into one of them, so no
 * framework error leaks another format.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  PayloadTooLargeError,
  RateLimitedError,
  ServiceUnavailableError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../errors.ts';
import { toApiError, WHOLE_BODY } from '../failures.ts';
import type { OAuthErrorCode } from '../generated/schemas.ts';

export abstract class OAuthError extends Error {
  abstract readonly error: OAuthErrorCode;
  abstract readonly statusCode: number;
  /** 5xx descriptions are never shown to clients (they may name internals). */
  readonly expose: boolean = true;
  readonly headers: Record<string, string> = {};
}

export class InvalidRequestError extends OAuthError {
  readonly error = 'invalid_request';
  readonly statusCode = 400;
}

/** RFC 6749 §5.2: 401, with a Basic challenge when the client tried HTTP Basic. */
export class InvalidClientError extends OAuthError {
  readonly error = 'invalid_client';
  readonly statusCode = 401;
  override readonly headers: Record<string, string>;
  constructor(message = 'Client authentication failed.', usedBasic = false) {
    super(message);
    this.headers = usedBasic ? { 'www-authenticate': 'Basic realm="oauth"' } : {};
  }
}

export class InvalidGrantError extends OAuthError {
  readonly error = 'invalid_grant';
  readonly statusCode = 400;
}

export class UnsupportedGrantTypeError extends OAuthError {
  readonly error = 'unsupported_grant_type';
  readonly statusCode = 400;
}

export class InvalidScopeError extends OAuthError {
  readonly error = 'invalid_scope';
  readonly statusCode = 400;
}

/** Authorization endpoint only: the user pressed "Deny". */
export class AccessDeniedError extends OAuthError {
  readonly error = 'access_denied';
  readonly statusCode = 400;
}

export class UnsupportedResponseTypeError extends OAuthError {
  readonly error = 'unsupported_response_type';
  readonly statusCode = 400;
}

class ServerError extends OAuthError {
  readonly error = 'server_error';
  readonly statusCode = 500;
  override readonly expose = false;
}

class TemporarilyUnavailableError extends OAuthError {
  readonly error = 'temporarily_unavailable';
  readonly statusCode = 503;
  override readonly expose = false;
}

class OAuthRateLimitedError extends OAuthError {
  readonly error = 'rate_limited';
  readonly statusCode = 429;
}

const FORM_BODY = 'The body must be application/x-www-form-urlencoded.';

/** A validation error in RFC 6749 words: the parameter that is missing or invalid. */
function invalidRequest(error: ValidationError): InvalidRequestError {
  const first = error.details?.[0];
  if (!first) return new InvalidRequestError('The request is invalid.');
  if (first.path === WHOLE_BODY) return new InvalidRequestError(FORM_BODY);
  const parameter = first.path.split('/').pop();
  const problem = first.message === 'is required' ? 'is missing' : 'is invalid';
  return new InvalidRequestError(`The parameter ${parameter} ${problem}.`);
}

/**
 * Any failure -> an OAuth error: ours as thrown; anything else mapped once (src/failures.ts),
 * then said in RFC 6749's codes. Request problems become invalid_request.
 */
export function toOAuthError(err: unknown): OAuthError {
  if (err instanceof OAuthError) return err;
  const error = toApiError(err);
  if (error instanceof ServiceUnavailableError)
    return new TemporarilyUnavailableError('The database is unreachable.');
  if (error instanceof RateLimitedError) return new OAuthRateLimitedError(error.message);
  if (error instanceof UnsupportedMediaTypeError) return new InvalidRequestError(FORM_BODY);
  if (error instanceof PayloadTooLargeError)
    return new InvalidRequestError('The request body is too large.');
  if (error instanceof ValidationError) return invalidRequest(error);
  if (error.statusCode < 500) return new InvalidRequestError('The request is invalid.');
  return new ServerError('Unexpected failure.');
}

/**
 * The `error_description` a client may see: plain ASCII for its developer (RFC 6749 §5.2);
 * for 5xx only a generic sentence with the request id (details go to the log).
 */
export function publicDescription(error: OAuthError, requestId: string): string {
  if (error.expose) return error.message;
  if (error instanceof TemporarilyUnavailableError)
    return 'The service is temporarily unavailable. Please retry shortly.';
  return `Something went wrong. Request id ${requestId}.`;
}

/** The one writer of RFC 6749 §5.2 error bodies (token and revocation endpoints, metadata). */
function sendOAuthError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  const error = toOAuthError(err);
  if (error.statusCode >= 500) request.log.error({ err }, 'OAuth request failed');
  const description = publicDescription(error, request.id);
  return reply
    .code(error.statusCode)
    .headers({ ...error.headers, 'cache-control': 'no-store', pragma: 'no-cache' })
    .type('application/json; charset=utf-8')
    .send({ error: error.error, error_description: description });
}

/** A route-level error handler (see plugins/operations.ts) answering in the OAuth format. */
export async function oauthErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  return sendOAuthError(request, reply, error);
}
