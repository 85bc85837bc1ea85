/**
 * Generates src/generated/ from the OpenAPI document:
 *   schemas.ts        TypeBox consts for components.schemas (runtime validation and serialization)
 *   operations.ts     one entry per operationId with its Fastify route schema
 *   openapi-types.ts  client types from openapi-typescript (into sdk/src/generated/: the SDK's)
 *   constants.ts      enum values, OAuth scopes with their wording, as plain consts
 *   document.ts       the document as parsed, an object: what the server serves
 *
 * Usage: node --import tsx scripts/generate.ts [input.yaml] [outDir]
 *
 * One job per module under scripts/generate/: document.ts reads the document and resolves $refs,
 * typebox-mapper.ts maps JSON Schema to TypeBox code, schemas-module.ts and operations-module.ts
 * emit the two TypeBox files, constants-module.ts the plain constants, document-module.ts the
 * document as an object, client-types.ts runs openapi-typescript, printer.ts lays code out,
 * files.ts adds the "do not edit" header and writes.
 *
 * The emitted JSON Schema validates exactly what the document says. Anything the generator
 * cannot map exactly throws with the JSON pointer of the construct: a silent Type.Any would
 * turn off validation without anyone noticing.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { generate } from './generate/files.ts';
import { GenerateError } from './generate/json.ts';

export { generate, generateFiles, type GeneratedFiles } from './generate/files.ts';
export { GenerateError } from './generate/json.ts';
export { generateConstants } from './generate/constants-module.ts';
export { generateOperations } from './generate/operations-module.ts';
export { generateSchemas } from './generate/schemas-module.ts';

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [input, outDir] = process.argv.slice(2);
  try {
    for (const file of await generate(input, outDir))
      console.log(`wrote ${path.relative(process.cwd(), file)}`);
  } catch (error) {
    // A GenerateError's message already says where; anything else keeps its stack.
    console.error(error instanceof GenerateError ? `generate: ${error.message}` : error);
    process.exitCode = 1;
  }
}
