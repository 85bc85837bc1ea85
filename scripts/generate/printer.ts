/**
 * Code model and printer: a tiny prettier-like layout so the output reads like hand-written code.
 */
import { GenerateError, isObject, type Json } from './json.ts';

export type Code =
  | { kind: 'raw'; text: string }
  /** `typeArgs` are the members of one union type argument: `Type.Unsafe<'a' | 'b'>(...)`. */
  | { kind: 'call'; callee: string; typeArgs?: string[]; args: Code[] }
  | { kind: 'object'; entries: Array<[key: string, value: Code]> }
  | { kind: 'array'; items: Code[] };
export type Entries = Array<[key: string, value: Code]>;

export const raw = (text: string): Code => ({ kind: 'raw', text });
export const call = (callee: string, ...args: Array<Code | undefined>): Code => ({
  kind: 'call',
  callee,
  args: args.filter((arg): arg is Code => arg !== undefined),
});
export const unsafe = (typeArgs: string[], schema: Code): Code => ({
  kind: 'call',
  callee: 'Type.Unsafe',
  typeArgs,
  args: [schema],
});
export const object = (entries: Entries): Code => ({ kind: 'object', entries });
export const array = (items: Code[]): Code => ({ kind: 'array', items });
/** An options object, or nothing when there are no options. */
export const optionsArg = (entries: Entries): Code | undefined =>
  entries.length > 0 ? object(entries) : undefined;

export const MAX_WIDTH = 100;

function printFlat(code: Code): string {
  switch (code.kind) {
    case 'raw':
      return code.text;
    case 'call':
      return `${calleeFlat(code)}(${code.args.map(printFlat).join(', ')})`;
    case 'array':
      return `[${code.items.map(printFlat).join(', ')}]`;
    case 'object':
      if (code.entries.length === 0) return '{}';
      return `{ ${code.entries.map(([key, value]) => `${propertyKey(key)}: ${printFlat(value)}`).join(', ')} }`;
  }
}

function calleeFlat(code: Extract<Code, { kind: 'call' }>): string {
  return code.typeArgs ? `${code.callee}<${code.typeArgs.join(' | ')}>` : code.callee;
}

/**
 * Prints `code` starting at `column` on a line indented by `indent`; `reserve` is room kept for
 * what follows on the same line (a comma, a closing parenthesis).
 */
export function print(code: Code, indent: string, column: number, reserve = 0): string {
  const flat = printFlat(code);
  if (column + flat.length + reserve <= MAX_WIDTH || code.kind === 'raw') return flat;
  const inner = `${indent}  `;
  const lines = (items: string[]): string => items.map((item) => `${inner}${item},\n`).join('');
  switch (code.kind) {
    case 'array':
      return `[\n${lines(code.items.map((item) => print(item, inner, inner.length, 1)))}${indent}]`;
    case 'object':
      return `{\n${lines(
        code.entries.map(([key, value]) => {
          const prefix = `${propertyKey(key)}: `;
          return prefix + print(value, inner, inner.length + prefix.length, 1);
        }),
      )}${indent}}`;
    case 'call':
      return printCall(code, indent, column, reserve);
  }
}

function printCall(
  code: Extract<Code, { kind: 'call' }>,
  indent: string,
  column: number,
  reserve: number,
): string {
  const inner = `${indent}  `;
  let callee = calleeFlat(code);
  if (column + callee.length + 2 > MAX_WIDTH && code.typeArgs) {
    // A long union type argument goes one member per line, as prettier prints it.
    callee = `${code.callee}<\n${code.typeArgs.map((member) => `${inner}| ${member}\n`).join('')}${indent}>`;
  }
  const open = callee.includes('\n') ? indent.length + 2 : column + callee.length + 1;
  const [first, ...rest] = code.args;
  // Hug the first argument when the others fit after it: `Type.Object({\n...\n}, { ... })`.
  if (first !== undefined && first.kind !== 'raw') {
    const tail = rest.length > 0 ? `, ${rest.map(printFlat).join(', ')})` : ')';
    const head = print(first, indent, open, tail.length + reserve);
    const lastColumn = head.includes('\n')
      ? head.length - head.lastIndexOf('\n') - 1
      : open + head.length;
    if (lastColumn + tail.length + reserve <= MAX_WIDTH) return `${callee}(${head}${tail}`;
  }
  const args = code.args.map((arg) => `${inner}${print(arg, inner, inner.length, 1)},\n`);
  return `${callee}(\n${args.join('')}${indent})`;
}

export const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function propertyKey(key: string): string {
  return IDENTIFIER.test(key) || /^(0|[1-9]\d*)$/.test(key) ? key : quote(key);
}

/** A string literal, single-quoted unless the text has single quotes and no double ones. */
export function quote(value: string): string {
  if (value.includes("'") && !value.includes('"')) return JSON.stringify(value);
  return `'${JSON.stringify(value).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'")}'`;
}

export function jsonCode(value: Json): Code {
  if (typeof value === 'string') return raw(quote(value));
  if (Array.isArray(value)) return array(value.map(jsonCode));
  if (isObject(value))
    return object(Object.entries(value).map(([key, item]) => [key, jsonCode(item)]));
  return raw(String(value));
}

export function tsLiteralType(value: Json, at: string): string {
  if (typeof value === 'string') return quote(value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean')
    return String(value);
  throw new GenerateError(
    at,
    `enum values must be strings, numbers, booleans or null, got ${JSON.stringify(value)}`,
  );
}

export function importStatement(names: string[], from: string): string {
  const flat = `import { ${names.join(', ')} } from '${from}';\n`;
  if (flat.length <= MAX_WIDTH + 1) return flat;
  return `import {\n${names.map((name) => `  ${name},\n`).join('')}} from '${from}';\n`;
}

export function usesCallee(code: Code, prefix: string): boolean {
  switch (code.kind) {
    case 'raw':
      return false;
    case 'call':
      if (code.callee === prefix || (prefix.endsWith('.') && code.callee.startsWith(prefix)))
        return true;
      return code.args.some((arg) => usesCallee(arg, prefix));
    case 'array':
      return code.items.some((item) => usesCallee(item, prefix));
    case 'object':
      return code.entries.some(([, value]) => usesCallee(value, prefix));
  }
}
