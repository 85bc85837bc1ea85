/**
 * JSON values of the parsed document, JSON pointers for error messages, and the generator's one
 * error type.
 */

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export class GenerateError extends Error {
  constructor(at: string, message: string) {
    super(`${at}: ${message}`);
    this.name = 'GenerateError';
  }
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON pointer (RFC 6901) of a child, for error messages. */
export function pointer(base: string, ...segments: Array<string | number>): string {
  return [
    base,
    ...segments.map((segment) => String(segment).replace(/~/g, '~0').replace(/\//g, '~1')),
  ].join('/');
}

export function unescapePointer(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

export function objectAt(value: Json | undefined, at: string): JsonObject {
  if (!isObject(value)) throw new GenerateError(at, 'expected an object');
  return value;
}

export function arrayAt(value: Json | undefined, at: string): Json[] {
  if (!Array.isArray(value)) throw new GenerateError(at, 'expected an array');
  return value;
}

export function stringAt(value: Json | undefined, at: string): string {
  if (typeof value !== 'string') throw new GenerateError(at, 'expected a string');
  return value;
}

export function sameJson(a: Json | undefined, b: Json | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
