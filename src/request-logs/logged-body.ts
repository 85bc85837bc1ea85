/**
 * What the request log keeps of a request's and a response's body (docs/portal.md, request
 * logs): JSON only, its first BODY_CAP_BYTES as sent, through the redactor of every log
 * (src/lib/redact.ts `redactJson`), with the whole body's size, so that a cut body says so. The
 * redaction is bounded by the cap, not by the body: a 1 MiB batch's costs what 8 KB's does.
 */
import { redactJson } from '../lib/redact.ts';

/** The most of each body kept (UTF-8 bytes). */
export const BODY_CAP_BYTES = 8192;

export interface LoggedBody {
  /** The body's first BODY_CAP_BYTES, redacted. */
  text: string;
  /** The whole body's size in bytes: larger than BODY_CAP_BYTES when `text` was cut. */
  size: number;
}

/** A JSON media type: application/json, application/problem+json, with parameters or not. */
export function isJsonType(type: string | undefined): boolean {
  if (!type) return false;
  const essence = type.split(';', 1)[0]!.trim().toLowerCase();
  return essence === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(essence);
}

/** A body's text as the log keeps it; null for an empty body. */
export function loggedBody(body: string): LoggedBody | null {
  if (body.length === 0) return null;
  // Counted without encoding the body (native, a fraction of a millisecond for 1 MiB).
  const size = Buffer.byteLength(body);
  if (size <= BODY_CAP_BYTES) return { text: redactJson(body), size };
  // Cut at a character's end: a partly kept character is dropped, not written as U+FFFD.
  const head = Buffer.from(body.slice(0, BODY_CAP_BYTES)).subarray(0, BODY_CAP_BYTES);
  const text = head.toString('utf8').replace(/\ufffd$/, '');
  return { text: redactJson(text), size };
}
