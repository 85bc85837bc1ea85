/**
 * Structured JSON logs (pino, through Fastify): one line per event, each request's lines
 * carrying its `reqId` (the X-Request-Id of the response). Secrets never reach a log line:
 *
 * - headers that carry them (Authorization, Cookie, Set-Cookie) and fields named like them
 *   (password, client_secret, code_verifier, token, access_token, secret) are redacted at the
 *   top level and one level down, wherever a log call puts them;
 * - `code` is redacted by context, where it is the OAuth parameter: in a request's body, form,
 *   query or params. Elsewhere a `code` is an HTTP status (a webhook attempt's) or an error
 *   code (ECONNREFUSED, 57P01), which operators need;
 * - the request line's URL goes through the redactor the request log uses (src/lib/redact.ts):
 *   values of secret-looking query and `;matrix` parameters, credentials anywhere in it;
 * - errors are serialized without the query parameters a database error carries (postgres.js
 *   `parameters`, Drizzle `params` and the "params:" line of its message: an insert's values
 *   may be a webhook secret) or the raw bytes of a malformed request (Node's `rawPacket`: its
 *   headers), without the values of a constraint violation's detail;
 * - last, every line as written, whatever field or message holds it, has our credentials
 *   (svc_ac_…, svc_live_…, svc_oauth_…, svc_whsec_…, whsec_…) cut after their prefix: an
 *   authorization code that a log call puts under another name is still caught by its value.
 */
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import { REDACTED, redactCredentials, redactText, redactUrl } from './redact.ts';

const SECRET_FIELDS = [
  'password',
  'client_secret',
  'code_verifier',
  'token',
  'access_token',
  'refresh_token',
  'secret',
];

const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.headers.authorization',
  '*.headers.cookie',
  'headers["set-cookie"]',
  '*.headers["set-cookie"]',
  ...SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]),
  // The authorization code as a request parameter (RFC 6749 §4.1.2, §4.1.3).
  'body.code',
  'form.code',
  'query.code',
  'params.code',
];

/**
 * Fields of errors that hold request data: a statement's values, a malformed request's raw bytes.
 */
const DROPPED_ERROR_FIELDS = new Set(['params', 'parameters', 'args', 'types', 'rawPacket']);

export function serializeError(err: unknown, depth = 0, withStack = true): unknown {
  if (!(err instanceof Error)) return typeof err === 'string' ? redactText(err) : err;
  const out: Record<string, unknown> = {
    type: err.constructor?.name ?? err.name,
    message: redactText(err.message),
    stack: !withStack || err.stack === undefined ? undefined : redactText(err.stack),
  };
  for (const [key, value] of Object.entries(err)) {
    if (DROPPED_ERROR_FIELDS.has(key) || key === 'cause' || key in out) continue;
    out[key] = typeof value === 'string' ? redactText(value) : value;
  }
  if (err.cause !== undefined && depth < 4)
    out.cause = serializeError(err.cause, depth + 1, withStack);
  return out;
}

/**
 * An error as serializeError writes it, without the stacks: for a failure that is not a bug (an
 * overload or an outage), whose type, code and message say what happened. Its stack would say
 * nothing more, and formatting one maps every frame through the build's source map (a parse of
 * about 40 MB of heap the first time, a lookup a frame after), paid for each refused request
 * under the very load the line reports.
 */
export function withoutStack(err: unknown): unknown {
  return serializeError(err, 0, false);
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
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

export function loggerOptions(
  level: string,
): NonNullable<Exclude<FastifyServerOptions['logger'], boolean>> {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    // The last pass over each line as written: a credential anywhere in it, under any field
    // name or in the message, loses its secret part.
    hooks: { streamWrite: redactCredentials },
    serializers: {
      req: serializeRequest as never,
      err: serializeError as never,
    },
  };
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
const BINDINGS = Symbol('requestLogger.bindings');
const CHILD = Symbol('requestLogger.child');
type Bindings = Record<string, unknown>;
/** Fastify's logger is pino's; these are the parts of pino's API used here. */
type PinoLogger = FastifyBaseLogger & {
  isLevelEnabled(level: string): boolean;
  bindings(): Bindings;
  setBindings(bindings: Bindings): void;
};
type LazyLogger = PinoLogger & { [BINDINGS]: Bindings; [CHILD]?: PinoLogger };

/** Per parent logger, the prototype of its lazy request loggers (made once). */
const lazyPrototypes = new WeakMap<PinoLogger, PinoLogger>();

function lazyPrototype(parent: PinoLogger): PinoLogger {
  const found = lazyPrototypes.get(parent);
  if (found) return found;
  const real = (lazy: LazyLogger) => (lazy[CHILD] ??= parent.child(lazy[BINDINGS]) as PinoLogger);
  // The parent's disabled levels are inherited as they are (pino's no-ops); the enabled ones,
  // and whatever reads the bindings, go to the child, made on first use.
  const proto = Object.create(parent) as Record<string, unknown>;
  for (const level of LEVELS) {
    if (!parent.isLevelEnabled(level)) continue;
    proto[level] = function log(this: LazyLogger, ...args: unknown[]) {
      (real(this)[level] as (...a: unknown[]) => void)(...args);
    };
  }
  proto.child = function child(this: LazyLogger, ...args: Parameters<FastifyBaseLogger['child']>) {
    return real(this).child(...args);
  };
  proto.bindings = function bindings(this: LazyLogger) {
    return real(this).bindings();
  };
  proto.setBindings = function setBindings(this: LazyLogger, bindings: Bindings) {
    real(this).setBindings(bindings);
  };
  lazyPrototypes.set(parent, proto as unknown as PinoLogger);
  return proto as unknown as PinoLogger;
}

/**
 * A request's logger (Fastify's childLoggerFactory, src/app.ts). Each request's lines carry its
 * bindings (reqId, traceId), but at the production level (warn) most requests write no line,
 * and pino's child() with our redaction costs about 3.4 µs (docs/performance.md, "Where each
 * microsecond goes"). So when the parent does not log at info (Fastify's two lines per request),
 * the request gets a logger whose disabled levels are the parent's no-ops and whose first
 * enabled call makes the child.
 */
export function requestLogger(
  parent: PinoLogger,
  bindings: Bindings,
  options?: Parameters<FastifyBaseLogger['child']>[1],
): PinoLogger {
  if (options || parent.isLevelEnabled('info'))
    return parent.child(bindings, options) as PinoLogger;
  const lazy = Object.create(lazyPrototype(parent)) as LazyLogger;
  lazy[BINDINGS] = bindings;
  return lazy;
}
