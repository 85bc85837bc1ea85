/**
 * What the request log stores of a request's URL: the path and query as requested, through the
 * redactor of every log (src/lib/redact.ts), at most MAX_PATH characters.
 */
import { redactUrl } from '../lib/redact.ts';

const MAX_PATH = 2048;

export function loggedPath(url: string): string {
  return redactUrl(url).slice(0, MAX_PATH);
}
