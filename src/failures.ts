/**
 * The one mapping of request failures to typed errors. Whatever is thrown while a request is
 * served (our ApiErrors; Fastify's schema validation, body parsing, body limit and
 * content-type errors; the rate limiter's 429; the router's URL errors; an unreachable
 * database) becomes an ApiError here, once. Three formats write it out:
 *
 * - the API envelope `{ error, meta }` (plugins/envelope.ts),
 * - RFC 6749 JSON `{ error, error_description }` (oauth/oauth-errors.ts, toOAuthError),
 * - an HTML page (web/html.ts, sendErrorPage).
 *
 * None of them inspects a framework error itself.
 */
import type { FastifyError } from 'fastify';
import { isConnectionError, isPoolTimeout } from './db/errors.ts';
import {
  ApiError,
  InternalError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  ServiceUnavailableError,
  UnsupportedMediaTypeError,
  ValidationError,
} from './errors.ts';
import { validationDetails } from './lib/validator.ts';

/** Retry-After of a 503: PostgreSQL restarts and failovers take seconds. */
export const RETRY_AFTER_503_SECONDS = '5';

/** Retry-After of a 503 for a saturated pool: the queue it could not join drains in moments. */
const RETRY_AFTER_BUSY_SECONDS = '1';

/** The path of a body that could not be read as a whole (not one of its fields). */
export const WHOLE_BODY = '';

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isPoolTimeout(error)) {
    return new ServiceUnavailableError('The service is busy; retry shortly.', undefined, {
      'retry-after': RETRY_AFTER_BUSY_SECONDS,
    });
  }
  if (isConnectionError(error)) {
    return new ServiceUnavailableError(
      'The service is temporarily unavailable; retry shortly.',
      undefined,
      { 'retry-after': RETRY_AFTER_503_SECONDS },
    );
  }
  const err = error as FastifyError & { validationContext?: string };
  if (err.validation) {
    const details = validationDetails(err.validation, err.validationContext ?? 'body');
    const summary = details.map((d) => `${d.path || 'the body'} ${d.message}`).join('; ');
    return new ValidationError(`Invalid request: ${summary}`, details);
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLargeError('The request body is larger than this endpoint accepts.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new UnsupportedMediaTypeError(
        'This Content-Type is not supported here; send application/json.',
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return ValidationError.field(WHOLE_BODY, 'must be a JSON body');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return ValidationError.field(WHOLE_BODY, 'is not valid JSON');
    // The router's own errors (Fastify's frameworkErrors option), before any hook runs.
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new NotFoundError('No resource at this path.');
    case 'FST_ERR_BAD_URL':
      return ValidationError.field('/path', 'is not a valid URL path');
  }
  if (err.statusCode === 429) return new RateLimitedError(err.message || 'Too many requests.');
  if (err instanceof SyntaxError && err.statusCode === 400)
    return ValidationError.field(WHOLE_BODY, 'is not valid JSON');
  if (err.statusCode === 400) return new ValidationError(err.message);
  if (err.statusCode === 413) return new PayloadTooLargeError('The request body is too large.');
  if (err.statusCode === 415) return new UnsupportedMediaTypeError(err.message);
  if (err.statusCode === 503)
    return new ServiceUnavailableError('The service is temporarily unavailable.');
  return new InternalError('Something went wrong on our side.');
}
