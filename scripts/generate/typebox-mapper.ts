/**
 * JSON Schema (OpenAPI 3.1) -> TypeBox builder code. Anything that cannot be mapped exactly throws
 * with the JSON pointer of the construct: a silent Type.Any would turn off validation unnoticed.
 */
import { resolveComponent } from './document.ts';
import {
  GenerateError,
  arrayAt,
  isObject,
  type Json,
  type JsonObject,
  objectAt,
  pointer,
  sameJson,
  stringAt,
} from './json.ts';
import {
  type Code,
  type Entries,
  array,
  call,
  jsonCode,
  object,
  optionsArg,
  raw,
  tsLiteralType,
  unsafe,
} from './printer.ts';

// Kept as they are: they do not change validation, and Ajv's strict mode knows them.
const ANNOTATIONS = ['title', 'description', 'default', 'deprecated', 'readOnly', 'writeOnly'];
// Not needed at runtime, and `example`/`discriminator`/`xml` are unknown keywords to Ajv's strict
// mode.
const DROPPED = new Set([
  'example',
  'examples',
  'discriminator',
  'xml',
  'externalDocs',
  '$comment',
]);
const STRING_KEYWORDS = ['minLength', 'maxLength', 'pattern', 'format'];
const NUMBER_KEYWORDS = [
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
];
const ARRAY_KEYWORDS = ['minItems', 'maxItems', 'uniqueItems'];
const OBJECT_KEYWORDS = ['minProperties', 'maxProperties'];
/**
 * Rules across an object's fields or an array's items (OpenAPI "Rules the schemas cannot
 * express" lists the others): kept verbatim as JSON Schema beside the TypeBox builder, which
 * copies its options into the schema. They narrow what validates, never the static type. The
 * server's Ajv knows each of them (its 2019-09 class, src/lib/validator.ts): a keyword Ajv does
 * not know would be ignored without a word.
 * Their subschemas are plain JSON Schema, so a `$ref` inside is refused (it would point into the
 * document, which the generated code does not hold).
 */
const ASSERTION_KEYWORDS = ['if', 'then', 'else', 'not', 'dependentSchemas', 'dependentRequired'];

export interface SchemaContext {
  doc: JsonObject;
  schemas: JsonObject;
  /** Names of components.schemas consts the generated code refers to, in first-use order. */
  refs: Set<string>;
}

export function newContext(doc: JsonObject): SchemaContext {
  const components = isObject(doc.components) ? doc.components : {};
  const schemas =
    components.schemas === undefined ? {} : objectAt(components.schemas, '#/components/schemas');
  return { doc, schemas, refs: new Set() };
}

function keywords(schema: JsonObject): string[] {
  return Object.keys(schema).filter((key) => !DROPPED.has(key) && !key.startsWith('x-'));
}

function assertOnly(schema: JsonObject, allowed: string[], at: string, where: string): void {
  for (const key of keywords(schema)) {
    if (!allowed.includes(key))
      throw new GenerateError(at, `keyword '${key}' is not supported ${where}`);
  }
}

/**
 * The schema's own keywords from `allowed`, in document order, as an options object's entries.
 * additionalProperties is the one schema-valued option.
 */
function optionEntries(
  schema: JsonObject,
  allowed: string[],
  at: string,
  ctx?: SchemaContext,
): Entries {
  const entries: Entries = [];
  for (const key of keywords(schema)) {
    if (!allowed.includes(key)) continue;
    const value = schema[key] as Json;
    if (NUMBER_KEYWORDS.includes(key) && typeof value !== 'number') {
      // OpenAPI 3.0's boolean exclusiveMinimum means something else in 3.1.
      throw new GenerateError(pointer(at, key), `'${key}' must be a number in OpenAPI 3.1`);
    }
    if (key === 'additionalProperties' && ctx && typeof value !== 'boolean') {
      entries.push([key, schemaCode(value, pointer(at, key), ctx)]);
    } else if (ASSERTION_KEYWORDS.includes(key)) {
      entries.push([key, jsonCode(assertionJson(value, pointer(at, key)))]);
    } else {
      entries.push([key, jsonCode(value)]);
    }
  }
  return entries;
}

/** An assertion keyword's value, without annotations the runtime does not need; no `$ref`. */
function assertionJson(value: Json, at: string): Json {
  if (Array.isArray(value))
    return value.map((item, index) => assertionJson(item, pointer(at, index)));
  if (!isObject(value)) return value;
  const kept: JsonObject = {};
  for (const [key, item] of Object.entries(value)) {
    if (key === '$ref')
      throw new GenerateError(
        pointer(at, key),
        `'$ref' inside a cross-field rule is not supported`,
      );
    if (DROPPED.has(key) || key.startsWith('x-') || key === 'description') continue;
    kept[key] = assertionJson(item, pointer(at, key));
  }
  return kept;
}

export function schemaCode(schema: Json | undefined, at: string, ctx: SchemaContext): Code {
  if (schema === true) return call('Type.Unknown');
  if (!isObject(schema)) throw new GenerateError(at, 'expected a schema object');
  if ('nullable' in schema) {
    throw new GenerateError(
      at,
      "'nullable' is OpenAPI 3.0 and ignored by 3.1; write type: [T, 'null'] instead",
    );
  }
  if (keywords(schema).every((key) => ANNOTATIONS.includes(key))) {
    return call('Type.Unknown', optionsArg(optionEntries(schema, ANNOTATIONS, at)));
  }
  if ('$ref' in schema) return refCode(schema, at, ctx);
  if ('allOf' in schema) return allOfCode(schema, at, ctx);
  if ('oneOf' in schema || 'anyOf' in schema) return unionCode(schema, at, ctx);
  if ('enum' in schema) return enumCode(schema, at);
  if ('const' in schema) return constCode(schema, at);
  if (Array.isArray(schema.type)) return typeArrayCode(schema, at, ctx);
  if (typeof schema.type === 'string') return typedCode(schema, schema.type, at, ctx);
  if ('properties' in schema) {
    throw new GenerateError(
      at,
      "'properties' without type: object also accepts non-objects; add type: object",
    );
  }
  throw new GenerateError(
    at,
    `unsupported schema without type (keywords: ${keywords(schema).join(', ')})`,
  );
}

/** `$ref` to a component schema: reuse its const. */
function refCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  // Annotations beside $ref are dropped: the const is shared, and annotations do not validate.
  assertOnly(schema, ['$ref', ...ANNOTATIONS], at, "next to '$ref' (wrap in allOf to combine)");
  const { name } = resolveComponent(ctx.doc, schema.$ref, 'schemas', at);
  ctx.refs.add(name);
  return raw(name);
}

/** `type: [T, 'null']` -> Nullable(T). */
function typeArrayCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  const types = arrayAt(schema.type, pointer(at, 'type'));
  const others = types.filter((type) => type !== 'null');
  const [only] = others;
  if (typeof only !== 'string' || others.length !== 1) {
    const message = `type ${JSON.stringify(types)} is not supported; use [T] or [T, 'null']`;
    throw new GenerateError(pointer(at, 'type'), message);
  }
  const code = typedCode({ ...schema, type: only }, only, at, ctx);
  return types.length === 1 ? code : call('Nullable', code);
}

function typedCode(schema: JsonObject, type: string, at: string, ctx: SchemaContext): Code {
  switch (type) {
    case 'string':
      return scalarCode('Type.String', schema, STRING_KEYWORDS, at);
    case 'integer':
      return scalarCode('Type.Integer', schema, NUMBER_KEYWORDS, at);
    case 'number':
      return scalarCode('Type.Number', schema, NUMBER_KEYWORDS, at);
    case 'boolean':
      return scalarCode('Type.Boolean', schema, [], at);
    case 'null':
      return scalarCode('Type.Null', schema, [], at);
    case 'array':
      return arrayCode(schema, at, ctx);
    case 'object':
      return objectCode(schema, at, ctx);
    default:
      throw new GenerateError(pointer(at, 'type'), `unknown type '${type}'`);
  }
}

function scalarCode(builder: string, schema: JsonObject, allowed: string[], at: string): Code {
  assertOnly(
    schema,
    ['type', ...allowed, ...ANNOTATIONS],
    at,
    `with type '${String(schema.type)}'`,
  );
  return call(builder, optionsArg(optionEntries(schema, [...allowed, ...ANNOTATIONS], at)));
}

function arrayCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  const allowed = [...ARRAY_KEYWORDS, ...ASSERTION_KEYWORDS, ...ANNOTATIONS];
  assertOnly(schema, ['type', 'items', ...allowed], at, "with type 'array'");
  if (!('items' in schema))
    throw new GenerateError(at, "array without 'items' (write items: {} to accept anything)");
  const items = schemaCode(schema.items, pointer(at, 'items'), ctx);
  const options = optionsArg(optionEntries(schema, allowed, at));
  const mode = schema['x-validate-items'];
  if (mode === undefined) return call('Type.Array', items, options);
  // `x-validate-items: individually`: the request validates only that each item is an object;
  // the handler validates every item on its own against the referenced schema (batch endpoints
  // report per-item results). The static type stays the referenced schema's.
  if (mode !== 'individually') {
    throw new GenerateError(
      pointer(at, 'x-validate-items'),
      "the only supported value is 'individually'",
    );
  }
  if (items.kind !== 'raw')
    throw new GenerateError(pointer(at, 'items'), "x-validate-items needs items to be a '$ref'");
  return call(
    'Type.Array',
    unsafe([`Static<typeof ${items.text}>`], object([['type', jsonCode('object')]])),
    options,
  );
}

export interface PropertySpec {
  name: string;
  schema: Json;
  at: string;
}

function objectCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  const allowed = [
    'properties',
    'required',
    'additionalProperties',
    ...OBJECT_KEYWORDS,
    ...ASSERTION_KEYWORDS,
    ...ANNOTATIONS,
  ];
  assertOnly(schema, ['type', ...allowed], at, "with type 'object'");
  const properties = propertySpecs(schema, at);
  const required = requiredNames(schema, properties, at);
  const additional = schema.additionalProperties;
  if (properties.length === 0 && isObject(additional)) {
    const options = optionEntries(schema, [...OBJECT_KEYWORDS, ...ANNOTATIONS], at);
    return call(
      'Dictionary',
      schemaCode(additional, pointer(at, 'additionalProperties'), ctx),
      optionsArg(options),
    );
  }
  const options = optionEntries(
    schema,
    ['additionalProperties', ...OBJECT_KEYWORDS, ...ASSERTION_KEYWORDS, ...ANNOTATIONS],
    at,
    ctx,
  );
  if (properties.length === 0 && additional === undefined) {
    // Same validation, but fast-json-stringify drops undeclared properties unless
    // additionalProperties is set, and would serialize every free-form object as {}.
    options.push(['additionalProperties', raw('true')]);
  }
  return objectFromParts(properties, required, options, ctx);
}

function propertySpecs(schema: JsonObject, at: string): PropertySpec[] {
  if (schema.properties === undefined) return [];
  const properties = objectAt(schema.properties, pointer(at, 'properties'));
  return Object.entries(properties).map(([name, value]) => ({
    name,
    schema: value,
    at: pointer(at, 'properties', name),
  }));
}

function requiredNames(schema: JsonObject, properties: PropertySpec[], at: string): string[] {
  const names = requiredList(schema, at);
  for (const name of names) {
    // TypeBox derives `required` from the properties, so a name without a property would be lost.
    if (!properties.some((property) => property.name === name)) {
      throw new GenerateError(
        pointer(at, 'required'),
        `required property '${name}' is not in properties`,
      );
    }
  }
  return names;
}

function requiredList(schema: JsonObject, at: string): string[] {
  if (schema.required === undefined) return [];
  const names = arrayAt(schema.required, pointer(at, 'required'));
  return names.map((name, index) => stringAt(name, pointer(at, 'required', index)));
}

export function objectFromParts(
  properties: PropertySpec[],
  required: string[],
  options: Entries,
  ctx: SchemaContext,
): Code {
  const entries = properties.map(({ name, schema, at }): [string, Code] => {
    const code = schemaCode(schema, at, ctx);
    return [name, required.includes(name) ? code : call('Type.Optional', code)];
  });
  return call('Type.Object', object(entries), optionsArg(options));
}

/**
 * String/number enum -> Type.Unsafe with the schema kept as is: one clear Ajv error, not an anyOf
 * cascade.
 */
function enumCode(schema: JsonObject, at: string): Code {
  assertOnly(
    schema,
    ['type', 'enum', ...STRING_KEYWORDS, ...NUMBER_KEYWORDS, ...ANNOTATIONS],
    at,
    "next to 'enum'",
  );
  const values = arrayAt(schema.enum, pointer(at, 'enum'));
  if (values.length === 0) throw new GenerateError(pointer(at, 'enum'), 'empty enum');
  const members = values.map((value, index) => tsLiteralType(value, pointer(at, 'enum', index)));
  const kept = Object.fromEntries(keywords(schema).map((key) => [key, schema[key] as Json]));
  return unsafe(members, jsonCode(kept));
}

function constCode(schema: JsonObject, at: string): Code {
  // A sibling `type` is dropped: Type.Literal emits the type of the value, which const implies.
  assertOnly(schema, ['type', 'const', ...ANNOTATIONS], at, "next to 'const'");
  const value = schema.const as Json;
  const options = optionsArg(optionEntries(schema, ANNOTATIONS, at));
  if (value === null) return call('Type.Null', options);
  if (typeof value === 'object') {
    throw new GenerateError(
      pointer(at, 'const'),
      'const must be a string, number, boolean or null',
    );
  }
  return call('Type.Literal', jsonCode(value), options);
}

/** oneOf/anyOf. anyOf maps to Type.Union exactly; oneOf does when its branches cannot overlap. */
function unionCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  if ('oneOf' in schema && 'anyOf' in schema) {
    throw new GenerateError(at, 'oneOf and anyOf together are not supported');
  }
  const keyword = 'oneOf' in schema ? 'oneOf' : 'anyOf';
  assertOnly(schema, [keyword, 'type', ...ANNOTATIONS], at, `next to '${keyword}'`);
  const branches = arrayAt(schema[keyword], pointer(at, keyword));
  if (branches.length === 0) throw new GenerateError(pointer(at, keyword), `empty ${keyword}`);
  assertSiblingTypeRedundant(schema, branches, at, ctx);
  const options = optionEntries(schema, ANNOTATIONS, at);
  const exclusive = keyword === 'anyOf' || pairwiseDisjoint(branches, ctx);
  const branchAt = (index: number): string => pointer(at, keyword, index);

  const nonNull = branches
    .map((branch, index) => ({ branch, index }))
    .filter(({ branch }) => !isNullSchema(branch));
  const [single] = nonNull;
  // T or null: one type array (Nullable), when T is a plain type or a component that is one.
  if (exclusive && single && nonNull.length === 1 && branches.length === 2) {
    if (isPlainTyped(single.branch)) {
      // The document's annotations move onto the wrapped schema; they do not validate.
      const annotated = { ...single.branch, ...pick(schema, ANNOTATIONS) };
      return call('Nullable', schemaCode(annotated, branchAt(single.index), ctx));
    }
    if (nullableComponent(single.branch, ctx))
      return call(
        'Nullable',
        refCode(single.branch, branchAt(single.index), ctx),
        optionsArg(options),
      );
  }
  const codes = branches.map((branch, index) => schemaCode(branch, branchAt(index), ctx));
  return call(exclusive ? 'Type.Union' : 'OneOf', array(codes), optionsArg(options));
}

/**
 * `type: object` beside oneOf is fine when every branch is an object anyway; otherwise it narrows.
 */
function assertSiblingTypeRedundant(
  schema: JsonObject,
  branches: Json[],
  at: string,
  ctx: SchemaContext,
): void {
  if (schema.type === undefined) return;
  const sibling = new Set([stringAt(schema.type, pointer(at, 'type'))]);
  for (const branch of branches) {
    const types = typeSet(branch, ctx, new Set());
    if (!types || [...types].some((type) => !overlaps(new Set([type]), sibling))) {
      const message = "'type' next to a union narrows its branches; move it into each branch";
      throw new GenerateError(pointer(at, 'type'), message);
    }
  }
}

function isNullSchema(schema: Json): boolean {
  if (!isObject(schema) || schema.type !== 'null') return false;
  return keywords(schema).every((key) => key === 'type' || ANNOTATIONS.includes(key));
}

/**
 * A `$ref` to a component Nullable() can wrap: a plain-typed schema (isPlainTyped), an enum of
 * that type allowed. Its null joins the type and the enum.
 */
function nullableComponent(schema: Json, ctx: SchemaContext): schema is JsonObject {
  if (!isObject(schema) || typeof schema.$ref !== 'string') return false;
  const { value } = resolveComponent(ctx.doc, schema.$ref, 'schemas', '#');
  if (!isObject(value)) return false;
  const { enum: values, ...typed } = value;
  if (!isPlainTyped(typed)) return false;
  return (
    values === undefined ||
    (Array.isArray(values) && values.every((item) => jsonType(item) === typed.type))
  );
}

/** A schema Nullable() can wrap: one plain `type`, no composition, enum or const. */
function isPlainTyped(schema: Json): schema is JsonObject {
  if (!isObject(schema) || typeof schema.type !== 'string' || schema.type === 'null') return false;
  return !['$ref', 'enum', 'const', 'oneOf', 'anyOf', 'allOf'].some((key) => key in schema);
}

/**
 * JSON types a schema can accept, or undefined when unknown (then we assume it accepts anything).
 * integer is kept apart from number but overlaps it.
 */
function typeSet(
  schema: Json | undefined,
  ctx: SchemaContext,
  seen: Set<string>,
): Set<string> | undefined {
  if (!isObject(schema)) return undefined;
  if ('$ref' in schema) {
    const target = resolveComponent(ctx.doc, schema.$ref, 'schemas', '#');
    if (seen.has(target.name)) return undefined;
    return typeSet(target.value, ctx, new Set([...seen, target.name]));
  }
  if ('const' in schema) return new Set([jsonType(schema.const as Json)]);
  if (Array.isArray(schema.enum)) return new Set(schema.enum.map(jsonType));
  if (typeof schema.type === 'string') return new Set([schema.type]);
  if (Array.isArray(schema.type)) return new Set(schema.type.map(String));
  const branches = [schema.oneOf, schema.anyOf].find(Array.isArray);
  if (branches) {
    const sets = branches.map((branch) => typeSet(branch, ctx, seen));
    return sets.every((set) => set !== undefined)
      ? new Set(sets.flatMap((set) => [...set]))
      : undefined;
  }
  if (Array.isArray(schema.allOf)) {
    const known = schema.allOf
      .map((member) => typeSet(member, ctx, seen))
      .filter((set) => set !== undefined);
    const intersect = (a: Set<string>, b: Set<string>): Set<string> =>
      new Set([...a].filter((type) => overlaps(new Set([type]), b)));
    return known.reduce<Set<string> | undefined>(
      (acc, set) => (acc ? intersect(acc, set) : set),
      undefined,
    );
  }
  return undefined;
}

function jsonType(value: Json): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function overlaps(a: Set<string>, b: Set<string>): boolean {
  const widen = (set: Set<string>): Set<string> =>
    set.has('integer') ? new Set([...set, 'number']) : set;
  const wideB = widen(b);
  return [...widen(a)].some((type) => wideB.has(type) || (type === 'number' && b.has('integer')));
}

function pairwiseDisjoint(branches: Json[], ctx: SchemaContext): boolean {
  return branches.every((a, i) => branches.slice(i + 1).every((b) => disjoint(a, b, ctx)));
}

/**
 * True when no value can match both schemas: different types, or a required property with
 * different const/enum values (a discriminator).
 */
function disjoint(a: Json, b: Json, ctx: SchemaContext): boolean {
  const typesA = typeSet(a, ctx, new Set());
  const typesB = typeSet(b, ctx, new Set());
  if (typesA && typesB && !overlaps(typesA, typesB)) return true;
  const shapeA = objectShape(a, ctx, new Set());
  const shapeB = objectShape(b, ctx, new Set());
  if (!shapeA || !shapeB) return false;
  return shapeA.required.some((name) => {
    if (!shapeB.required.includes(name)) return false;
    const valuesA = literalValues(shapeA.properties[name], ctx);
    const valuesB = literalValues(shapeB.properties[name], ctx);
    if (valuesA === undefined || valuesB === undefined) return false;
    return !valuesA.some((value) => valuesB.some((other) => sameJson(value, other)));
  });
}

interface ObjectShape {
  properties: JsonObject;
  required: string[];
}

function objectShape(
  schema: Json | undefined,
  ctx: SchemaContext,
  seen: Set<string>,
): ObjectShape | undefined {
  if (!isObject(schema)) return undefined;
  if ('$ref' in schema) {
    const target = resolveComponent(ctx.doc, schema.$ref, 'schemas', '#');
    return seen.has(target.name)
      ? undefined
      : objectShape(target.value, ctx, new Set([...seen, target.name]));
  }
  const shape: ObjectShape = {
    properties: isObject(schema.properties) ? { ...schema.properties } : {},
    required: Array.isArray(schema.required) ? schema.required.map(String) : [],
  };
  for (const member of Array.isArray(schema.allOf) ? schema.allOf : []) {
    const part = objectShape(member, ctx, seen);
    if (part) {
      Object.assign(shape.properties, part.properties);
      shape.required.push(...part.required);
    }
  }
  return shape;
}

function literalValues(schema: Json | undefined, ctx: SchemaContext): Json[] | undefined {
  if (!isObject(schema)) return undefined;
  if ('$ref' in schema)
    return literalValues(resolveComponent(ctx.doc, schema.$ref, 'schemas', '#').value, ctx);
  if ('const' in schema) return [schema.const as Json];
  return Array.isArray(schema.enum) ? schema.enum : undefined;
}

/**
 * allOf of plain object schemas, merged into one Type.Object (TypeBox's Intersect would emit
 * allOf, where `additionalProperties: false` in one member rejects the others' properties).
 * unevaluatedProperties: false beside the allOf becomes additionalProperties: false, which is the
 * same once every property lives in one object.
 */
function allOfCode(schema: JsonObject, at: string, ctx: SchemaContext): Code {
  const allowed = [
    'allOf',
    'type',
    'properties',
    'required',
    'unevaluatedProperties',
    ...ANNOTATIONS,
  ];
  if ('additionalProperties' in schema) {
    const message =
      'additionalProperties beside allOf only sees sibling properties; use unevaluatedProperties: false';
    throw new GenerateError(at, message);
  }
  assertOnly(schema, allowed, at, "next to 'allOf'");
  const members = arrayAt(schema.allOf, pointer(at, 'allOf'));
  const [onlyMember] = members;
  const annotationsOnly = keywords(schema).every(
    (key) => key === 'allOf' || ANNOTATIONS.includes(key),
  );
  if (members.length === 1 && onlyMember !== undefined && annotationsOnly) {
    // `allOf: [X]` + annotations is how 3.0 documents annotated a $ref: it is just X.
    return schemaCode(onlyMember, pointer(at, 'allOf', 0), ctx);
  }
  if (schema.type !== undefined && schema.type !== 'object') {
    throw new GenerateError(
      pointer(at, 'type'),
      'allOf is only supported for objects (type: object)',
    );
  }
  const merged: { properties: PropertySpec[]; required: string[] } = {
    properties: [],
    required: [],
  };
  members.forEach((member, index) =>
    mergeObjectMember(merged, member, pointer(at, 'allOf', index), ctx, []),
  );
  mergeObjectMember(
    merged,
    { type: 'object', ...pick(schema, ['properties', 'required']) },
    at,
    ctx,
    [],
  );
  for (const name of merged.required) {
    if (!merged.properties.some((property) => property.name === name)) {
      throw new GenerateError(at, `required property '${name}' is not in any member's properties`);
    }
  }

  const options: Entries = [];
  for (const key of keywords(schema)) {
    if (ANNOTATIONS.includes(key)) options.push([key, jsonCode(schema[key] as Json)]);
    if (key === 'unevaluatedProperties') {
      if (schema.unevaluatedProperties === false)
        options.push(['additionalProperties', raw('false')]);
      else if (schema.unevaluatedProperties !== true) {
        throw new GenerateError(
          pointer(at, key),
          'only unevaluatedProperties: false or true is supported',
        );
      }
    }
  }
  return objectFromParts(merged.properties, merged.required, options, ctx);
}

function pick(schema: JsonObject, keys: string[]): JsonObject {
  return Object.fromEntries(
    keys.filter((key) => key in schema).map((key) => [key, schema[key] as Json]),
  );
}

function mergeObjectMember(
  merged: { properties: PropertySpec[]; required: string[] },
  member: Json,
  at: string,
  ctx: SchemaContext,
  stack: string[],
): void {
  const schema = objectAt(member, at);
  if ('$ref' in schema) {
    assertOnly(schema, ['$ref', ...ANNOTATIONS], at, "next to '$ref' in an allOf member");
    const target = resolveComponent(ctx.doc, schema.$ref, 'schemas', at);
    const chain = [...stack, target.name];
    if (stack.includes(target.name))
      throw new GenerateError(at, `allOf cycle: ${chain.join(' -> ')}`);
    mergeObjectMember(
      merged,
      target.value,
      pointer('#/components/schemas', target.name),
      ctx,
      chain,
    );
    return;
  }
  if (schema.additionalProperties !== undefined && schema.additionalProperties !== true) {
    const message =
      "an allOf member with additionalProperties would reject the other members' properties; " +
      'use unevaluatedProperties: false beside the allOf';
    throw new GenerateError(pointer(at, 'additionalProperties'), message);
  }
  const allowed = [
    'type',
    'properties',
    'required',
    'allOf',
    'additionalProperties',
    ...ANNOTATIONS,
  ];
  assertOnly(schema, allowed, at, 'in an allOf member (only plain objects can be merged)');
  if (schema.type !== undefined && schema.type !== 'object') {
    throw new GenerateError(pointer(at, 'type'), 'allOf members must be objects');
  }
  const nested = schema.allOf === undefined ? [] : arrayAt(schema.allOf, pointer(at, 'allOf'));
  nested.forEach((member, index) =>
    mergeObjectMember(merged, member, pointer(at, 'allOf', index), ctx, stack),
  );
  const properties = propertySpecs(schema, at);
  for (const property of properties) {
    const existing = merged.properties.find((other) => other.name === property.name);
    if (!existing) merged.properties.push(property);
    else if (!sameJson(existing.schema, property.schema)) {
      const message = `property '${property.name}' is also defined differently at ${existing.at}`;
      throw new GenerateError(property.at, message);
    }
  }
  for (const name of requiredList(schema, at))
    if (!merged.required.includes(name)) merged.required.push(name);
}
