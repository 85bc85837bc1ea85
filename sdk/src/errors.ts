/**
 * The one error the SDK throws for an HTTP error answer: it carries the document's error code
 * (`error.code` of the envelope, or `error` of an RFC 6749 OAuth error), the HTTP status, the
 * validation details and the request id to quote to support.
 */
import type { ErrorCode, ErrorDetail } from './types.js';

/**
 * A code of the document, or one added later within v1 (the document allows new codes: treat an
 * unknown one by its status). `unexpected_response` means the body was not one of our envelopes
 * (for example an HTML error page of a proxy in between).
 */
export type ApiErrorCode = ErrorCode | 'unexpected_response' | (string & {});

export class MarketplaceApiError extends Error {
  override name = 'MarketplaceApiError';
  /** HTTP status of the answer. */
  readonly status: number;
  readonly code: ApiErrorCode;
  /** `validation_error` only: one entry per problem, with a JSON Pointer `path`. */
  readonly details: readonly ErrorDetail[];
  /** `meta.request_id` (= the `X-Request-Id` header): quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** Seconds from `Retry-After` (429 rate_limited, 503 service_unavailable), if sent. */
  readonly retryAfter: number | undefined;
  /** The parsed body as received. */
  readonly body: unknown;

  constructor(init: {
    status: number;
    code: ApiErrorCode;
    message: string;
    details?: readonly ErrorDetail[];
    requestId?: string | undefined;
    retryAfter?: number | undefined;
    body?: unknown;
  }) {
    super(`${init.status} ${init.code}: ${init.message}`);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? [];
    this.requestId = init.requestId;
    this.retryAfter = init.retryAfter;
    this.body = init.body;
  }

  /** Narrows `code`: `if (err.is('not_found')) ...`. */
  is<C extends ApiErrorCode>(code: C): this is MarketplaceApiError & { code: C } {
    return this.code === code;
  }
}

/** `true` for a MarketplaceApiError, optionally of one code. */
export function isMarketplaceApiError<C extends ApiErrorCode>(
  error: unknown,
  code?: C,
): error is MarketplaceApiError & { code: C } {
  return error instanceof MarketplaceApiError && (code === undefined || error.code === code);
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

/** Builds the error of one non-2xx answer from its body (parsed JSON, or text) and headers. */
export function errorFromResponse(response: Response, body: unknown): MarketplaceApiError {
  const retry = Number(response.headers.get('retry-after'));
  const common = {
    status: response.status,
    body,
    retryAfter: response.headers.has('retry-after') && Number.isFinite(retry) ? retry : undefined,
    requestId: response.headers.get('x-request-id') ?? undefined,
  };
  if (isObject(body) && isObject(body.error) && typeof body.error.code === 'string') {
    const meta = isObject(body.meta) ? body.meta : {};
    return new MarketplaceApiError({
      ...common,
      code: body.error.code,
      message: typeof body.error.message === 'string' ? body.error.message : response.statusText,
      details: Array.isArray(body.error.details) ? (body.error.details as ErrorDetail[]) : [],
      requestId: typeof meta.request_id === 'string' ? meta.request_id : common.requestId,
    });
  }
  // RFC 6749 §5.2 errors of /oauth/token and /oauth/revoke: { error, error_description }.
  if (isObject(body) && typeof body.error === 'string') {
    return new MarketplaceApiError({
      ...common,
      code: body.error,
      message: typeof body.error_description === 'string' ? body.error_description : body.error,
    });
  }
  return new MarketplaceApiError({
    ...common,
    code: 'unexpected_response',
    message: `HTTP ${response.status} ${response.statusText}`.trim(),
  });
}
