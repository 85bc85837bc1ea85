/**
 * Request validation with Ajv, compiled from the generated schemas: the compilers the
 * validation plugin installs, the error details every format shares, and a body validator for
 * data checked outside a route (each batch item on its own).
 * Bodies are validated strictly (no type coercion, unknown fields refused, every error
 * reported); query strings, path and header parameters arrive as text and are coerced.
 *
 * An integer parameter must be written in decimal digits (`limit=10`). Ajv coerces any text
 * that JavaScript's Number() reads (`0x10`, `1e2`, ` 5`, `+5`, `5.0`), so the text is checked
 * before Ajv coerces it. The check lives here, not in the document: a `pattern` on an integer
 * schema is never applied (JSON Schema applies `pattern` to strings only), and a string schema
 * would change the parameter's type for every generated client.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { Ajv2019 as Ajv } from 'ajv/dist/2019.js';
import formatsPlugin from 'ajv-formats';
import type { FastifySchemaValidationError } from 'fastify';
import { ValidationError } from '../errors.ts';
import type { ErrorDetail } from '../generated/schemas.ts';

/**
 * Ajv's 2019-09 class: it knows the keywords the document's rules across fields use
 * (`dependentSchemas`, `dependentRequired`), which its draft-07 class, with `strict: false`,
 * would ignore without a word; every draft-07 keyword the schemas use means the same there.
 */
function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    // Bodies get no defaults: an upsert changes only the fields it sends, so the services
    // apply create-time defaults themselves. Query defaults (limit=24) are wanted.
    useDefaults: coerceTypes !== false,
    removeAdditional: false,
    allErrors: true,
    strict: false,
    // Each error carries its schema, so a `not` of a rule across fields can name the field.
    verbose: true,
  });
  // ajv-formats is CommonJS: under NodeNext its default import is the module object.
  const addFormats = ((formatsPlugin as unknown as { default?: unknown }).default ??
    formatsPlugin) as (a: Ajv) => Ajv;
  addFormats(ajv);
  return ajv;
}

const strictAjv = makeAjv(false);
const coercingAjv = makeAjv('array');

/** An optional minus and decimal digits: what an integer parameter may say. */
const DECIMAL_INTEGER = /^-?[0-9]+$/;

interface ObjectSchema {
  properties?: Record<string, { type?: unknown }>;
}

/** The names of a parameter object's integer properties. */
function integerProperties(schema: object): string[] {
  const properties = (schema as ObjectSchema).properties ?? {};
  return Object.keys(properties).filter((name) => properties[name]?.type === 'integer');
}

/** A type error for each integer property whose text is not decimal digits (before coercion). */
function nonDecimalIntegers(names: string[], data: unknown): ErrorObject[] {
  if (typeof data !== 'object' || data === null) return [];
  const values = data as Record<string, unknown>;
  return names
    .filter((name) =>
      [values[name]]
        .flat()
        .some((value) => typeof value === 'string' && !DECIMAL_INTEGER.test(value)),
    )
    .map((name) => ({
      instancePath: `/${name}`,
      schemaPath: `#/properties/${name}/type`,
      keyword: 'type',
      params: { type: 'integer' },
      message: 'must be an integer in decimal digits',
    }));
}

/** Compiles a query, path or header schema: Ajv's coercion, for integers from decimal text only. */
export function compileParameters(schema: object): ValidateFunction | ((data: unknown) => boolean) {
  const validate = coercingAjv.compile(schema);
  const integers = integerProperties(schema);
  if (integers.length === 0) return validate;
  const check = (data: unknown): boolean => {
    const refused = nonDecimalIntegers(integers, data);
    const valid = validate(data);
    if (refused.length === 0) {
      check.errors = validate.errors;
      return valid;
    }
    // Ajv has coerced the refused texts meanwhile: its verdict on them (a range) is dropped.
    const paths = new Set(refused.map((error) => error.instancePath));
    check.errors = [
      ...refused,
      ...(validate.errors ?? []).filter((error) => !paths.has(error.instancePath)),
    ];
    return false;
  };
  check.errors = null as ErrorObject[] | null | undefined;
  return check;
}

/** The detail of a query parameter holding U+0000 (OpenAPI "Errors"). */
const NUL_REFUSED = 'must not contain U+0000 (%00)';

const CONTEXT_PREFIX: Record<string, string> = {
  body: '',
  querystring: '/query',
  params: '/path',
  headers: '/headers',
};

/** RFC 6901: a property name inside a JSON Pointer escapes ~ and /. */
const escapePointer = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * The name of the first field whose name or value holds U+0000, in a query string or a
 * form-encoded body (flat: names to a text or a list of texts).
 */
function fieldWithNul(fields: unknown): string | undefined {
  for (const [name, value] of Object.entries((fields ?? {}) as Record<string, unknown>)) {
    const values = [value].flat();
    if (name.includes('\0') || values.some((v) => typeof v === 'string' && v.includes('\0')))
      return name;
  }
  return undefined;
}

const FORM = 'application/x-www-form-urlencoded';

/**
 * A 400 naming the first query parameter, or form field, whose name or value holds U+0000, if
 * any. PostgreSQL's text cannot hold it (22021, invalid byte sequence): a value that reached SQL
 * would fail the statement (a 500), so the validation plugin refuses it on every route, before
 * any handler, for pages without a schema too. It arrives only percent-encoded (Node refuses a
 * raw NUL in the request line), so a URL without %00 costs one search. JSON bodies are the
 * schemas' and services' to check (a batch refuses an item, not the request: listing-input.ts).
 */
export function nulInRequest(request: {
  url: string;
  query: unknown;
  body: unknown;
  headers: { 'content-type'?: string | undefined };
}): ValidationError | undefined {
  const start = request.url.indexOf('?');
  if (start !== -1 && (request.url.includes('%00', start) || request.url.includes('\0', start))) {
    const name = fieldWithNul(request.query);
    if (name !== undefined)
      return ValidationError.field(`/query/${escapePointer(name)}`, NUL_REFUSED);
  }
  if (request.headers['content-type']?.toLowerCase().startsWith(FORM)) {
    const name = fieldWithNul(request.body);
    if (name !== undefined) return ValidationError.field(`/${escapePointer(name)}`, NUL_REFUSED);
  }
  return undefined;
}

/**
 * The field a failed `not: {required: [field]}` forbids (the schema is on the error: Ajv's
 * `verbose` option).
 */
function excludedField(error: ErrorObject | FastifySchemaValidationError): string | undefined {
  const schema = (error as { schema?: unknown }).schema as { required?: unknown } | undefined;
  const names = schema?.required;
  return Array.isArray(names) && names.length === 1 ? String(names[0]) : undefined;
}

/** An error that only says a branch of a rule failed; the branch's errors are reported too. */
const isRuleWrapper = (error: ErrorObject | FastifySchemaValidationError) =>
  error.keyword === 'if' || (error.keyword === 'anyOf' && /\/then\//.test(error.schemaPath ?? ''));

/**
 * Ajv errors -> the error details of OpenAPI "Errors": JSON Pointer paths into the body, or
 * /query/limit.
 */
export function validationDetails(
  errors: (ErrorObject | FastifySchemaValidationError)[],
  context: string,
): ErrorDetail[] {
  const prefix = CONTEXT_PREFIX[context] ?? `/${context}`;
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const error of errors) {
    const params = (error.params ?? {}) as Record<string, unknown>;
    let path = prefix + (error.instancePath ?? '');
    let message = error.message ?? 'is invalid';
    // An if/then rule across fields (and an anyOf in its `then`) reports itself beside the
    // errors of its branches, which name the fields: its own error, at the object, says no more.
    if (isRuleWrapper(error)) continue;
    if (error.keyword === 'required' || error.keyword === 'dependentRequired') {
      path += `/${escapePointer(String(params.missingProperty))}`;
      message = 'is required';
    } else if (error.keyword === 'additionalProperties') {
      path += `/${escapePointer(String(params.additionalProperty))}`;
      message = 'is not a known field';
    } else if (error.keyword === 'not' && excludedField(error)) {
      // `dependentSchemas: {a: {not: {required: [b]}}}`: b may not be sent with a.
      const dependent = /\/dependentSchemas\/([^/]+)\/not$/.exec(error.schemaPath ?? '')?.[1];
      path += `/${escapePointer(excludedField(error)!)}`;
      message = dependent
        ? `cannot be sent together with ${dependent.replaceAll('~1', '/').replaceAll('~0', '~')}`
        : 'cannot be sent here';
    } else if (error.keyword === 'enum') {
      message = `must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
    } else if (error.keyword === 'const') {
      // Ajv's own words ("must be equal to constant") do not say which.
      message = `must be ${JSON.stringify(params.allowedValue)}`;
    }
    const key = `${path} ${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push({ path, message });
  }
  return details;
}

/** A strict body validator (no coercion, unknown fields refused), as Ajv compiles it. */
export function compileBody(schema: object): ValidateFunction {
  return strictAjv.compile(schema);
}

/**
 * A body validator for data validated outside a route's schema (each batch item on its own):
 * the same strict rules, with the same error details.
 */
export function compileBodyValidator(schema: object): (value: unknown) => ErrorDetail[] | null {
  const validate = strictAjv.compile(schema);
  return (value) => (validate(value) ? null : validationDetails(validate.errors ?? [], 'body'));
}
