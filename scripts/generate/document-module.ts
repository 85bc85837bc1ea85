/**
 * Emits document.ts: the document itself, parsed here from YAML, as an object literal.
 * The server hands it to @fastify/swagger (src/system/openapi-document.ts), so no start of the
 * server and no test parses YAML: parsing the document costs 0.3 s or more, importing this
 * module a few milliseconds. Pretty-printed, so a change to the document shows as a readable diff.
 */
import type { JsonObject } from './json.ts';

export function generateDocumentModule(doc: JsonObject): string {
  return (
    '/** openapi/openapi.yaml as parsed, before any $ref is resolved (served by @fastify/swagger). */\n' +
    `export const openapiDocument: { readonly [key: string]: unknown } = ${JSON.stringify(doc, null, 2)};\n`
  );
}
