/**
 * One error class per API error code (OpenAPI "Errors"). Code throws these; the envelope
 * plugin's error handler is the only place that turns them into a response.
 */
import type { ErrorCode, ErrorDetail, ErrorResponse } from './generated/schemas.ts';

/**
 * The `error` object of the envelope for an error, as every door sends it: the error handler
 * (src/plugins/envelope.ts), a refused unparsable request, a failed batch item. A message that
 * may not be shown (5xx) is replaced by one quoting the request id.
 */
export function errorObject(error: ApiError, requestId?: string): ErrorResponse['error'] {
  const message = error.expose
    ? error.message
    : `Something went wrong on our side. Quote request id ${requestId} if you contact support.`;
  return {
    code: error.code,
    message,
    ...(error.details?.length ? { details: error.details } : {}),
  };
}

export abstract class ApiError extends Error {
  abstract readonly code: ErrorCode;
  abstract readonly statusCode: number;
  /** 5xx messages are never shown to clients; the handler substitutes a generic one. */
  readonly expose: boolean = true;
  readonly details: ErrorDetail[] | undefined;
  /** Response headers that belong to this error (WWW-Authenticate, Allow, Retry-After). */
  readonly headers: Record<string, string>;

  constructor(message: string, details?: ErrorDetail[], headers: Record<string, string> = {}) {
    super(message);
    this.details = details;
    this.headers = headers;
  }
}

export class ValidationError extends ApiError {
  readonly code = 'validation_error';
  readonly statusCode = 400;
  /** One field: `new ValidationError('/title', 'must be ...')`. */
  /**
   * A refusal in words for people (the portal shows it as is; the CLI and the API send it as
   * `message`), naming the field in `details`: `ValidationError.say('/scopes', 'Choose at least
   * one scope.')`.
   */
  static say(path: string, words: string): ValidationError {
    return new ValidationError(words, [{ path, message: words }]);
  }

  static field(path: string, message: string): ValidationError {
    return new ValidationError(
      `${path.replace(/^\//, '').replaceAll('/', '.') || 'The body'} ${message}`,
      [{ path, message }],
    );
  }
}

/** RFC 6750 §3: a 401 names the scheme it wants, and says when a credential was rejected. */
export class UnauthorizedError extends ApiError {
  readonly code = 'unauthorized';
  readonly statusCode = 401;
  constructor(message: string, options: { rejectedCredential?: boolean } = {}) {
    super(message, undefined, {
      'www-authenticate': options.rejectedCredential
        ? 'Bearer realm="api", error="invalid_token"'
        : 'Bearer realm="api"',
    });
  }
}

export class ForbiddenError extends ApiError {
  readonly code = 'forbidden';
  readonly statusCode = 403;

  /** RFC 6750 §3.1: a credential without the scope the operation needs. */
  static insufficientScope(scopes: string[], message?: string): ForbiddenError {
    const words = message ?? `This credential lacks the scope ${scopes.join(' ')}.`;
    return new ForbiddenError(words, undefined, {
      'www-authenticate': `Bearer realm="api", error="insufficient_scope", scope="${scopes.join(' ')}"`,
    });
  }
}

export class NotFoundError extends ApiError {
  readonly code = 'not_found';
  readonly statusCode = 404;
}

export class MethodNotAllowedError extends ApiError {
  readonly code = 'method_not_allowed';
  readonly statusCode = 405;
}

export class ConflictError extends ApiError {
  readonly code = 'conflict';
  readonly statusCode = 409;
}

export class PayloadTooLargeError extends ApiError {
  readonly code = 'payload_too_large';
  readonly statusCode = 413;
}

export class UnsupportedMediaTypeError extends ApiError {
  readonly code = 'unsupported_media_type';
  readonly statusCode = 415;
}

export class RateLimitedError extends ApiError {
  readonly code = 'rate_limited';
  readonly statusCode = 429;
}

export class InternalError extends ApiError {
  readonly code = 'internal_error';
  readonly statusCode = 500;
  override readonly expose = false;
}

export class ServiceUnavailableError extends ApiError {
  readonly code = 'service_unavailable';
  readonly statusCode = 503;
}
