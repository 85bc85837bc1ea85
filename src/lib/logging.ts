/**
 * Structured JSON logs (pino, through Fastify): one line per event, each request's lines
 * carrying its `reqId` (the X-Request-Id of the response). Secrets never reach a log line:
 *
 * - headers that carry them (Authorization, Cookie, Set-Cookie) and fields named like them
 *   (password, client_secret, code_verifier, token, access_token, secret) are redacted at the
 *   top level and one level down, wherever a log call puts them (an authorization `code` at the
 *   top level and in body, form, query or params);
 * - the request line's URL has the values of such query parameters replaced;
 * - errors are serialized without the query parameters a database error carries (postgres.js
 *   `parameters`, Drizzle `params` and the "params:" line of its message: an insert's values
 *   may be a webhook secret), without the values of a constraint violation's detail, and any
 *   text that still holds one of our credentials (svc_live_…, svc_oauth_…, svc_whsec_…) has it
 *   cut after its prefix.
 */
import type { FastifyServerOptions } from 'fastify';

export const REDACTED = '[redacted]';

const SECRET_FIELDS = ['password', 'client_secret', 'code_verifier', 'token', 'access_token', 'refresh_token', 'secret'];

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.headers.authorization',
  '*.headers.cookie',
  ...SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]),
  // An authorization code; not `*.code`, which would hide error codes (ECONNREFUSED, 57P01).
  'code',
  'body.code',
  'form.code',
  'query.code',
  'params.code',
];

const SECRET_QUERY = new RegExp(`([?&](?:${[...SECRET_FIELDS, 'code'].join('|')})=)[^&#]*`, 'gi');
/** Our credentials by prefix (src/lib/secrets.ts PREFIX). */
const CREDENTIAL = /\b(svc_(?:live|sandbox|cs|ac|oauth|whsec)_)[A-Za-z0-9_-]+/g;
/** Drizzle's DrizzleQueryError message: "Failed query: <sql>\nparams: <values>". */
const DRIZZLE_PARAMS = /(\n\s*params: )[^\n]*/g;
/** PostgreSQL's detail of a unique or foreign-key violation: "Key (col)=(value) ...". */
const KEY_VALUES = /(Key \([^)]*\)=\()[^)]*(\))/g;
/** Fields of database errors that hold the statement's values. */
const DROPPED_ERROR_FIELDS = new Set(['params', 'parameters', 'args', 'types']);

export function scrubText(text: string): string {
  return text
    .replace(DRIZZLE_PARAMS, `$1${REDACTED}`)
    .replace(KEY_VALUES, `$1${REDACTED}$2`)
    .replace(CREDENTIAL, `$1${REDACTED}`);
}

export function scrubUrl(url: string): string {
  return scrubText(url.replace(SECRET_QUERY, `$1${REDACTED}`));
}

export function serializeError(err: unknown, depth = 0): unknown {
  if (!(err instanceof Error)) return typeof err === 'string' ? scrubText(err) : err;
  const out: Record<string, unknown> = {
    type: err.constructor?.name ?? err.name,
    message: scrubText(err.message),
    stack: err.stack === undefined ? undefined : scrubText(err.stack),
  };
  for (const [key, value] of Object.entries(err)) {
    if (DROPPED_ERROR_FIELDS.has(key) || key === 'cause' || key in out) continue;
    out[key] = typeof value === 'string' ? scrubText(value) : value;
  }
  if (err.cause !== undefined && depth < 4) out.cause = serializeError(err.cause, depth + 1);
  return out;
}

interface RequestLike {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number | undefined };
}

/** Fastify's default request serializer, with the URL scrubbed. */
function serializeRequest(request: RequestLike) {
  return {
    method: request.method,
    url: scrubUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

export function loggerOptions(level: string): NonNullable<Exclude<FastifyServerOptions['logger'], boolean>> {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    serializers: {
      req: serializeRequest as never,
      err: serializeError as never,
    },
  };
}
