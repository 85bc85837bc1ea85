/**
 * The one redactor of everything a request can put into a log: the stdout log's URLs and lines
 * (src/lib/logging.ts) and the request log's path and error message (src/plugins/request-logs.ts),
 * hence the portal's Request logs page and `admin app logs`, which show what was stored.
 *
 * - A credential of ours, wherever it appears (a path segment, a query or `;matrix` value, a
 *   field name quoted in an error message, percent-encoded or not), keeps its prefix and loses
 *   the rest: `svc_live_REDACTED` still says what was pasted.
 * - A query or `;matrix` parameter whose name looks secret (after percent-decoding: `%74oken`
 *   is `token`) has its value replaced, whatever the value: `?api_key=…`, `?pwd=…`, `?sig=…`.
 * - In a text: a database error's statement values and a constraint violation's key values.
 */
import { PREFIX } from './secrets.ts';

export const REDACTED = 'REDACTED';

/** Parameter names whose values are never written: any name containing one of these. */
const SECRET_NAME =
  /token|key|secret|code|pass|pwd|auth|session|sig|cookie|credential|jwt|bearer|verifier/i;

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Our credentials by prefix (src/lib/secrets.ts PREFIX), anywhere in a text. */
const CREDENTIAL = new RegExp(
  `(${Object.values(PREFIX).map(escape).join('|')})[A-Za-z0-9_-]+`,
  'g',
);
/** Drizzle's DrizzleQueryError message: "Failed query: <sql>\nparams: <values>". */
const DRIZZLE_PARAMS = /(\n\s*params: )[^\n]*/g;
/** PostgreSQL's detail of a unique or foreign-key violation: "Key (col)=(value) ...". */
const KEY_VALUES = /(Key \([^)]*\)=\()[^)]*(\))/g;

/** Credentials in a text lose their secret part (cheap when there is none: one search). */
export function redactCredentials(text: string): string {
  return text.includes('svc_') ? text.replace(CREDENTIAL, `$1${REDACTED}`) : text;
}

/** A message or an error's text: credentials, statement values, constraint key values. */
export function redactText(text: string): string {
  return redactCredentials(
    text.replace(DRIZZLE_PARAMS, `$1${REDACTED}`).replace(KEY_VALUES, `$1${REDACTED}$2`),
  );
}

function decode(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/** A path segment or parameter value: unchanged unless it holds a credential, raw or encoded. */
function redactValue(raw: string): string {
  const decoded = decode(raw);
  if (!decoded.includes('svc_')) return raw;
  const redacted = redactCredentials(decoded);
  return redacted === decoded ? raw : encodeURIComponent(redacted);
}

/** `name=value` (or a bare `value`) of a query or a `;matrix` list. */
function redactParameter(part: string): string {
  const eq = part.indexOf('=');
  if (eq === -1) return redactValue(part);
  const name = part.slice(0, eq);
  if (SECRET_NAME.test(decode(name))) return `${name}=${REDACTED}`;
  return `${name}=${redactValue(part.slice(eq + 1))}`;
}

/** A path segment with its `;matrix` parameters, if any. */
function redactSegment(segment: string): string {
  const [head = '', ...parameters] = segment.split(';');
  return [redactValue(head), ...parameters.map(redactParameter)].join(';');
}

/**
 * A request's URL (path and query) as it may be written down: the same characters except the
 * values redacted as above.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = (q === -1 ? url : url.slice(0, q)).split('/').map(redactSegment).join('/');
  if (q === -1) return path;
  return `${path}?${url
    .slice(q + 1)
    .split('&')
    .map(redactParameter)
    .join('&')}`;
}
