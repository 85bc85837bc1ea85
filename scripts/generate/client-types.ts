/** Emits openapi-types.ts: the client types of openapi-typescript. */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';

export async function generateClientTypes(inputPath: string): Promise<string> {
  // defaultNonNullable false: a request field with a default stays optional for clients.
  // emptyObjectsUnknown: a schema without `properties` (an allOf member that only adds `required`,
  // as in OwnerListing, or a free-form object) must not become Record<string, never>, which
  // would turn every property of the intersection into `never` for SDK users.
  const ast = await openapiTS(pathToFileURL(path.resolve(inputPath)), {
    defaultNonNullable: false,
    emptyObjectsUnknown: true,
    silent: true,
  });
  return astToString(ast);
}
