import { readFile } from 'node:fs/promises';
import { projectFile } from '../project-files.ts';

export const openapiPath = projectFile('openapi', 'openapi.yaml');

export interface ServedDocument {
  json(): Promise<string>;
  yaml(): Promise<string>;
}

/**
 * The document as served, with `servers` pointing at this deployment's BASE_URL. Parsed on
 * its first request and kept: parsing the YAML costs about 0.3 s, which a server that is
 * never asked for its document (or not yet) should not spend before its first response
 * (`npm run bench`, first response after start). The YAML text is made on its first request too.
 */
export function servedDocument(baseUrl: string): ServedDocument {
  let parsed: Promise<{ document: Record<string, unknown>; json: string }> | undefined;
  let yaml: Promise<string> | undefined;
  const load = () =>
    (parsed ??= (async () => {
      const { parse } = await import('yaml');
      const document = parse(await readFile(openapiPath, 'utf8')) as Record<string, unknown>;
      document.servers = [{ url: baseUrl, description: 'This server' }];
      return { document, json: JSON.stringify(document) };
    })());
  return {
    json: async () => (await load()).json,
    yaml: () =>
      (yaml ??= (async () => {
        const [{ stringify }, { document }] = await Promise.all([import('yaml'), load()]);
        return stringify(document);
      })()),
  };
}
