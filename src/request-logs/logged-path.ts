/**
 * What the request log stores of a request's URL: the path as requested, with the value of every
 * secret-looking query parameter redacted (a credential pasted into a URL, say), at most
 * MAX_PATH characters.
 */
/** Query parameters whose values are never stored. */
const SECRET_NAME =
  /token|key|secret|code|password|passwd|auth|session|signature|cookie|credential/i;
const MAX_PATH = 2048;

export function loggedPath(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url.slice(0, MAX_PATH);
  const query = new URLSearchParams(url.slice(q + 1));
  for (const name of new Set(query.keys())) if (SECRET_NAME.test(name)) query.set(name, 'REDACTED');
  const text = query.toString();
  return (text ? `${url.slice(0, q)}?${text}` : url.slice(0, q)).slice(0, MAX_PATH);
}
