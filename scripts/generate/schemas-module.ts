/**
 * Emits schemas.ts: one TypeBox const and static type per components.schemas entry, dependencies
 * first.
 */
import { GenerateError, type JsonObject, pointer } from './json.ts';
import { type Code, IDENTIFIER, print, raw } from './printer.ts';
import { type SchemaContext, newContext, schemaCode } from './typebox-mapper.ts';

const SCHEMA_HELPERS = `import {
  Kind,
  Type,
  type SchemaOptions,
  type Static,
  type TSchema,
  type TUnsafe,
} from '@sinclair/typebox';

/**
 * \`type: [T, 'null']\` kept as one plain type array rather than an anyOf: fast-json-stringify
 * serializes it directly (an anyOf costs an Ajv check per value, per response) and Ajv reports one
 * clear error. An enum lists null too. Also for an anyOf of a component and null: \`options\` are
 * the anyOf's annotations. The kind is Unsafe because TypeBox's own Value.Check does not know this
 * shape; validation is Ajv's.
 */
export function Nullable<T extends TSchema>(
  schema: T,
  options: SchemaOptions = {},
): TUnsafe<Static<T> | null> {
  const nullable: TSchema = { ...schema, ...options, [Kind]: 'Unsafe', type: [schema.type, 'null'] };
  if (Array.isArray(schema.enum)) nullable.enum = [...schema.enum, null];
  return Type.Unsafe<Static<T> | null>(nullable);
}

/** JSON Schema oneOf (exactly one branch matches) for branches that may overlap; Type.Union emits anyOf. */
export function OneOf<T extends TSchema[]>(schemas: [...T], options: SchemaOptions = {}): TUnsafe<Static<T[number]>> {
  return Type.Unsafe<Static<T[number]>>({ ...options, oneOf: schemas });
}

/** An object with only \`additionalProperties: <schema>\`; Type.Record would emit patternProperties. */
export function Dictionary<T extends TSchema>(
  schema: T,
  options: SchemaOptions = {},
): TUnsafe<Record<string, Static<T>>> {
  return Type.Unsafe<Record<string, Static<T>>>({ ...options, type: 'object', additionalProperties: schema });
}
`;

export const HELPER_NAMES = ['Nullable', 'OneOf', 'Dictionary'];
// Names the generated modules use themselves, and globals a const would shadow for its importers.
const RESERVED_NAMES = new Set([
  ...HELPER_NAMES,
  ...['Type', 'Static', 'TSchema', 'TUnsafe', 'SchemaOptions', 'Kind'],
  ...['operations', 'OperationId', 'Operation'],
]);

export function generateSchemas(doc: JsonObject): { text: string; order: string[] } {
  const ctx = newContext(doc);
  const generated = new Map<string, { code: Code; refs: string[] }>();
  for (const [name, schema] of Object.entries(ctx.schemas)) {
    const at = pointer('#/components/schemas', name);
    assertSchemaName(name, at);
    const own: SchemaContext = { ...ctx, refs: new Set() };
    generated.set(name, { code: schemaCode(schema, at, own), refs: [...own.refs] });
  }
  const order = dependencyOrder(generated);
  const declarations = order.map((name) => {
    const prefix = `export const ${name} = `;
    const code = generated.get(name)?.code ?? raw('undefined');
    return `${prefix}${print(code, '', prefix.length, 1)};\nexport type ${name} = Static<typeof ${name}>;\n`;
  });
  return { text: [SCHEMA_HELPERS, ...declarations].join('\n'), order };
}

function assertSchemaName(name: string, at: string): void {
  if (!IDENTIFIER.test(name))
    throw new GenerateError(at, `schema name '${name}' is not a valid identifier`);
  if (RESERVED_NAMES.has(name)) {
    throw new GenerateError(
      at,
      `schema name '${name}' collides with a name the generated code uses`,
    );
  }
}

/**
 * Dependencies first; otherwise document order. TypeBox consts cannot refer to each other in a
 * cycle.
 */
function dependencyOrder(generated: Map<string, { refs: string[] }>): string[] {
  const order: string[] = [];
  const visiting: string[] = [];
  const visit = (name: string): void => {
    if (order.includes(name)) return;
    if (visiting.includes(name)) {
      const cycle = [...visiting.slice(visiting.indexOf(name)), name];
      const message = `$ref cycle ${cycle.join(' -> ')}: recursive schemas are not supported`;
      throw new GenerateError(pointer('#/components/schemas', name), message);
    }
    visiting.push(name);
    for (const ref of generated.get(name)?.refs ?? []) visit(ref);
    visiting.pop();
    order.push(name);
  };
  for (const name of generated.keys()) visit(name);
  return order;
}
