/**
 * Request validation with Ajv, compiled from the generated schemas.
 * Bodies are validated strictly (no type coercion, unknown fields refused, every error
 * reported); query strings, path and header parameters arrive as text and are coerced.
 */
import { Ajv, type ErrorObject } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifyInstance, FastifySchemaValidationError } from 'fastify';
import fp from 'fastify-plugin';
import type { ErrorDetail } from '../generated/schemas.ts';

function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    // Bodies get no defaults: an upsert changes only the fields it sends, so the services
    // apply create-time defaults themselves. Query defaults (limit=24) are wanted.
    useDefaults: coerceTypes !== false,
    removeAdditional: false,
    allErrors: true,
    strict: false,
  });
  // ajv-formats is CommonJS: under NodeNext its default import is the module object.
  const addFormats = ((formatsPlugin as unknown as { default?: unknown }).default ?? formatsPlugin) as (a: Ajv) => Ajv;
  addFormats(ajv);
  return ajv;
}

const strictAjv = makeAjv(false);
const coercingAjv = makeAjv('array');

const CONTEXT_PREFIX: Record<string, string> = {
  body: '',
  querystring: '/query',
  params: '/path',
  headers: '/headers',
};

/** RFC 6901: a property name inside a JSON Pointer escapes ~ and /. */
const escapePointer = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1');

/** Ajv errors -> CONTRACT §1 details: JSON Pointer paths into the body, or /query/limit. */
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
    if (error.keyword === 'required') {
      path += `/${escapePointer(String(params.missingProperty))}`;
      message = 'is required';
    } else if (error.keyword === 'additionalProperties') {
      path += `/${escapePointer(String(params.additionalProperty))}`;
      message = 'is not a known field';
    } else if (error.keyword === 'enum') {
      message = `must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
    }
    const key = `${path} ${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push({ path, message });
  }
  return details;
}

export default fp(
  async function validation(app: FastifyInstance) {
    // The API speaks JSON (the OAuth plugin adds form bodies where RFC 6749 wants them):
    // any other content type is 415 unsupported_media_type, not a body parsed as text.
    app.removeContentTypeParser(['text/plain']);
    app.setValidatorCompiler(({ schema, httpPart }) =>
      (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema as object),
    );
  },
  { name: 'validation', fastify: '5.x' },
);

/**
 * A body validator for data validated outside a route's schema (each batch item on its own):
 * the same strict rules, with the same error details.
 */
export function compileBodyValidator(schema: object): (value: unknown) => ErrorDetail[] | null {
  const validate = strictAjv.compile(schema);
  return (value) => (validate(value) ? null : validationDetails(validate.errors ?? [], 'body'));
}
