/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): a request's `traceparent` header
 * names the trace it belongs to. Its trace id goes on the request's log lines (app.ts,
 * childLoggerFactory), on the webhook events the request records, and from there on the log
 * lines of their delivery attempts, so one id follows a change from the caller's trace to the
 * receiver. The request id (X-Request-Id) stays what it was; a request without a valid
 * `traceparent` simply has no trace id.
 */
import { requestScope } from './request-scope.ts';

/** version-traceid-parentid-flags; version ff is invalid, all-zero ids are invalid. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS = /^0+$/;

/** The trace id of a `traceparent` header, or null when there is none or it is malformed. */
export function traceIdOf(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string' || header.length > 512) return null;
  const match = TRACEPARENT.exec(header.trim());
  if (!match) return null;
  const [, version, traceId, parentId, , rest] = match;
  if (version === 'ff' || ZEROS.test(traceId!) || ZEROS.test(parentId!)) return null;
  // Version 00 has exactly four fields; later versions may append more.
  if (version === '00' && rest !== undefined) return null;
  return traceId!;
}

/** The trace of the request being served, for code that has no request at hand. */
export function currentTraceId(): string | null {
  return requestScope()?.traceId ?? null;
}
