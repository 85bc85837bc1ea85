/** Reading posted forms (application/x-www-form-urlencoded, parsed by @fastify/formbody). */

export type FormBody = Readonly<Record<string, string | string[] | undefined>>;

export function asForm(body: unknown): FormBody {
  return body !== null && typeof body === 'object' ? (body as FormBody) : {};
}

/** A field sent exactly once; a missing or repeated field is undefined. */
export function field(form: FormBody, name: string): string | undefined {
  const value = Object.hasOwn(form, name) ? form[name] : undefined;
  return typeof value === 'string' ? value : undefined;
}

/** A field sent any number of times (checkboxes of one name): every value, in order; none is []. */
export function fieldValues(form: FormBody, name: string): string[] {
  const value = Object.hasOwn(form, name) ? form[name] : undefined;
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
}

/**
 * Where to go after signing in or out: only a path of this site (no scheme, no host, no `//`
 * or `/\` that a browser reads as another host), else the fallback. Keeps /login from being an
 * open redirect.
 */
export function safeReturnTo(value: string | undefined, fallback: string): string {
  if (value === undefined || !/^\/(?![/\\])[\x21-\x7e]*$/.test(value)) return fallback;
  return value;
}
