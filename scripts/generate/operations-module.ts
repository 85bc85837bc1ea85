/**
 * Emits operations.ts: one entry per operationId with its method, URL, security and Fastify route
 * schema.
 */
import { dereference } from './document.ts';
import {
  GenerateError,
  arrayAt,
  isObject,
  type Json,
  type JsonObject,
  objectAt,
  pointer,
  stringAt,
} from './json.ts';
import {
  type Code,
  call,
  type Entries,
  IDENTIFIER,
  importStatement,
  jsonCode,
  object,
  print,
  raw,
  usesCallee,
} from './printer.ts';
import { HELPER_NAMES } from './schemas-module.ts';
import { type SchemaContext, newContext, objectFromParts, schemaCode } from './typebox-mapper.ts';

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const JSON_MEDIA_TYPE = 'application/json';
const FORM_MEDIA_TYPE = 'application/x-www-form-urlencoded';
// OpenAPI 3.1 section 4.8.12.1: header parameters with these names SHALL be ignored.
const IGNORED_HEADERS = new Set(['accept', 'content-type', 'authorization']);

export function generateOperations(doc: JsonObject, schemaOrder: string[]): string {
  const ctx = newContext(doc);
  const entries: Entries = [];
  const paths = doc.paths === undefined ? {} : objectAt(doc.paths, '#/paths');
  for (const [route, pathItemValue] of Object.entries(paths)) {
    const pathAt = pointer('#/paths', route);
    const pathItem = objectAt(pathItemValue, pathAt);
    for (const method of Object.keys(pathItem).filter((key) => HTTP_METHODS.includes(key))) {
      const entry = operationCode(doc, route, pathItem, method, ctx);
      if (entries.some(([id]) => id === entry.id)) {
        throw new GenerateError(entry.at, `duplicate operationId '${entry.id}'`);
      }
      entries.push([entry.id, entry.code]);
    }
  }

  const prefix = 'export const operations = ';
  const suffix = ' as const;';
  const body = `${prefix}${print(object(entries), '', prefix.length, suffix.length)}${suffix}\n`;
  const imports: string[] = [];
  if (entries.some(([, code]) => usesTypeBuilder(code)))
    imports.push("import { Type } from '@sinclair/typebox';\n");
  const used = [
    ...HELPER_NAMES.filter((name) => usesCallee(object(entries), name)),
    ...schemaOrder.filter((name) => ctx.refs.has(name)),
  ];
  if (used.length > 0) imports.push(importStatement(used, './schemas.ts'));
  return [
    imports.join(''),
    body,
    'export type OperationId = keyof typeof operations;\n',
    'export type Operation = (typeof operations)[OperationId];\n',
  ].join('\n');
}

function usesTypeBuilder(code: Code): boolean {
  return usesCallee(code, 'Type.');
}

function operationCode(
  doc: JsonObject,
  route: string,
  pathItem: JsonObject,
  method: string,
  ctx: SchemaContext,
): { id: string; at: string; code: Code } {
  const at = pointer('#/paths', route, method);
  const operation = objectAt(pathItem[method], at);
  const id = stringAt(operation.operationId, pointer(at, 'operationId'));
  if (!IDENTIFIER.test(id)) {
    throw new GenerateError(
      pointer(at, 'operationId'),
      `operationId '${id}' is not a valid identifier`,
    );
  }
  const security = operation.security ?? doc.security ?? [];
  const body = requestBodyParts(doc, operation, at, ctx);
  const responses = responseParts(doc, operation, at, ctx);

  const schema: Entries = [];
  const parameters = parameterParts(doc, route, pathItem, operation, at, ctx);
  for (const location of ['query', 'path', 'header'] as const) {
    const code = parameters[location];
    if (code)
      schema.push([{ query: 'querystring', path: 'params', header: 'headers' }[location], code]);
  }
  if (body.schema) schema.push(['body', body.schema]);
  schema.push(['response', object(responses.schemas)]);

  return {
    id,
    at,
    code: object([
      ['operationId', jsonCode(id)],
      ['method', jsonCode(method.toUpperCase())],
      ['path', jsonCode(route)],
      ['url', jsonCode(route.replace(/\{([^}]+)\}/g, ':$1'))],
      [
        'tags',
        jsonCode(operation.tags === undefined ? [] : arrayAt(operation.tags, pointer(at, 'tags'))),
      ],
      ['security', jsonCode(arrayAt(security, pointer(at, 'security')))],
      ['bodyContentTypes', jsonCode(body.contentTypes)],
      ['bodyRequired', raw(String(body.required))],
      ...bodyLimitEntry(operation, at),
      ['responseContentTypes', object(responses.contentTypes)],
      ['schema', object(schema)],
    ]),
  };
}

/**
 * `x-body-limit: <bytes>` on an operation: its request body limit, when it differs from the
 * server's.
 */
function bodyLimitEntry(operation: JsonObject, at: string): Entries {
  const limit = operation['x-body-limit'];
  if (limit === undefined) return [];
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
    throw new GenerateError(pointer(at, 'x-body-limit'), 'must be a positive integer (bytes)');
  }
  return [['bodyLimit', raw(String(limit))]];
}

interface ParameterSpec {
  name: string;
  location: string;
  required: boolean;
  schema: Json;
  at: string;
}

/**
 * Path-level parameters apply to every operation; the operation's own override them by name and
 * location.
 */
function parameterParts(
  doc: JsonObject,
  route: string,
  pathItem: JsonObject,
  operation: JsonObject,
  at: string,
  ctx: SchemaContext,
): Partial<Record<'query' | 'path' | 'header', Code>> {
  const specs: ParameterSpec[] = [];
  const sources: Array<[Json | undefined, string]> = [
    [pathItem.parameters, pointer('#/paths', route, 'parameters')],
    [operation.parameters, pointer(at, 'parameters')],
  ];
  for (const [list, listAt] of sources) {
    if (list === undefined) continue;
    arrayAt(list, listAt).forEach((item, index) => {
      const spec = parameterSpec(doc, item, pointer(listAt, index));
      if (spec.location === 'header' && IGNORED_HEADERS.has(spec.name)) return;
      const existing = specs.findIndex(
        (other) => other.name === spec.name && other.location === spec.location,
      );
      if (existing >= 0) specs.splice(existing, 1, spec);
      else specs.push(spec);
    });
  }
  for (const [, name] of route.matchAll(/\{([^}]+)\}/g)) {
    if (!specs.some((spec) => spec.location === 'path' && spec.name === name)) {
      throw new GenerateError(at, `path parameter '${name}' of '${route}' is not declared`);
    }
  }

  const parts: Partial<Record<'query' | 'path' | 'header', Code>> = {};
  for (const location of ['query', 'path', 'header'] as const) {
    const own = specs.filter((spec) => spec.location === location);
    if (own.length === 0) continue;
    const properties = own.map(({ name, schema, at: specAt }) => ({ name, schema, at: specAt }));
    // No additionalProperties: other headers always exist, and clients add tracking query
    // parameters.
    const required = own.filter((spec) => spec.required).map((spec) => spec.name);
    parts[location] = objectFromParts(properties, required, [], ctx);
  }
  return parts;
}

function parameterSpec(doc: JsonObject, item: Json, itemAt: string): ParameterSpec {
  const { value: parameter, at } = dereference(doc, item, 'parameters', itemAt);
  const location = stringAt(parameter.in, pointer(at, 'in'));
  const name = stringAt(parameter.name, pointer(at, 'name'));
  if (!['query', 'path', 'header'].includes(location)) {
    const message = `parameters in '${location}' are not supported (Fastify validates query, params and headers)`;
    throw new GenerateError(pointer(at, 'in'), message);
  }
  if (!('schema' in parameter)) {
    throw new GenerateError(at, "parameters without 'schema' (content) are not supported");
  }
  return {
    // Node lowercases incoming header names.
    name: location === 'header' ? name.toLowerCase() : name,
    location,
    required: location === 'path' || parameter.required === true,
    schema: parameter.schema as Json,
    at: pointer(at, 'schema'),
  };
}

interface BodyParts {
  schema?: Code;
  contentTypes: string[];
  required: boolean;
}

function requestBodyParts(
  doc: JsonObject,
  operation: JsonObject,
  at: string,
  ctx: SchemaContext,
): BodyParts {
  if (operation.requestBody === undefined) return { contentTypes: [], required: false };
  const body = dereference(doc, operation.requestBody, 'requestBodies', pointer(at, 'requestBody'));
  const { value: requestBody, at: bodyAt } = body;
  const content = objectAt(requestBody.content, pointer(bodyAt, 'content'));
  const hasSchema = (type: string): boolean =>
    isObject(content[type]) && 'schema' in (content[type] as JsonObject);
  const mediaType = [JSON_MEDIA_TYPE, FORM_MEDIA_TYPE].find(hasSchema);
  const schemaAt = mediaType && pointer(bodyAt, 'content', mediaType, 'schema');
  return {
    schema:
      mediaType && schemaAt
        ? schemaCode((content[mediaType] as JsonObject).schema, schemaAt, ctx)
        : undefined,
    contentTypes: Object.keys(content),
    required: requestBody.required === true,
  };
}

function responseParts(
  doc: JsonObject,
  operation: JsonObject,
  at: string,
  ctx: SchemaContext,
): { schemas: Entries; contentTypes: Entries } {
  const responsesAt = pointer(at, 'responses');
  const responses = objectAt(operation.responses, responsesAt);
  const schemas: Entries = [];
  const contentTypes: Entries = [];
  for (const [status, value] of Object.entries(responses)) {
    if (!/^([1-5]\d\d|[1-5]XX|default)$/.test(status)) {
      throw new GenerateError(pointer(responsesAt, status), `'${status}' is not a response status`);
    }
    // Fastify spells status ranges in lowercase ('2xx').
    const key = status.toLowerCase();
    const { value: response, at: responseAt } = dereference(
      doc,
      value,
      'responses',
      pointer(responsesAt, status),
    );
    const content =
      response.content === undefined
        ? {}
        : objectAt(response.content, pointer(responseAt, 'content'));
    contentTypes.push([key, jsonCode(Object.keys(content))]);
    const json = content[JSON_MEDIA_TYPE];
    // A success without a body (204): its handler sends nothing, typed as null.
    if (Object.keys(content).length === 0 && /^2\d\d$/.test(status))
      schemas.push([key, call('Type.Null')]);
    if (isObject(json) && 'schema' in json) {
      schemas.push([
        key,
        schemaCode(json.schema, pointer(responseAt, 'content', JSON_MEDIA_TYPE, 'schema'), ctx),
      ]);
    }
  }
  return { schemas, contentTypes };
}
