/** Reads the OpenAPI document and resolves its local `$ref`s to components. */
import { parse as parseYaml } from 'yaml';
import {
  GenerateError,
  isObject,
  type Json,
  type JsonObject,
  objectAt,
  pointer,
  stringAt,
  unescapePointer,
} from './json.ts';

export function parseDocument(text: string, source: string): JsonObject {
  const doc: unknown = parseYaml(text);
  if (!isObject(doc)) throw new GenerateError(source, 'not an OpenAPI document');
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1')) {
    // 3.0 has different nullable and exclusiveMinimum semantics; mapping it as 3.1 would be wrong.
    throw new GenerateError(
      '#/openapi',
      `expected OpenAPI 3.1, got ${JSON.stringify(doc.openapi)}`,
    );
  }
  return doc;
}

export interface Resolved {
  name: string;
  value: JsonObject;
  /** The pointer of the resolved object, for error messages. */
  at: string;
}

/** Resolves a local `$ref` to `#/components/<kind>/<name>`. */
export function resolveComponent(
  doc: JsonObject,
  ref: Json | undefined,
  kind: string,
  at: string,
): Resolved {
  const text = stringAt(ref, pointer(at, '$ref'));
  const match = new RegExp(`^#/components/${kind}/([^/]+)$`).exec(text);
  if (!match?.[1]) {
    throw new GenerateError(
      at,
      `only $ref to '#/components/${kind}/<name>' is supported here, got '${text}'`,
    );
  }
  const name = unescapePointer(match[1]);
  const components = isObject(doc.components) ? doc.components[kind] : undefined;
  const value = isObject(components) ? components[name] : undefined;
  if (!isObject(value)) throw new GenerateError(at, `$ref '${text}' points to nothing`);
  return { name, value, at: text };
}

/** Follows `$ref` chains of a component kind (parameters, responses, request bodies). */
export function dereference(
  doc: JsonObject,
  value: Json | undefined,
  kind: string,
  at: string,
): Omit<Resolved, 'name'> {
  let current = { value: objectAt(value, at), at };
  for (const seen = new Set<string>(); '$ref' in current.value;) {
    const target = resolveComponent(doc, current.value.$ref, kind, current.at);
    if (seen.has(target.at)) throw new GenerateError(at, `$ref cycle through '${target.at}'`);
    seen.add(target.at);
    current = target;
  }
  return current;
}
