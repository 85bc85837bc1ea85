import { readFile } from 'node:fs/promises';
import { projectFile } from '../project-files.ts';

const openapiPath = projectFile('openapi', 'openapi.yaml');

export interface ServedDocument {
  json(): Promise<string>;
  yaml(): Promise<string>;
}

/**
 * The document as served, by its own operation (GET /api/v1/openapi.json and .yaml) and to the
 * /docs reference. Not through @fastify/swagger: its dynamic mode builds a document from the
 * routes (the opposite of this project, where the hand-written document is the source and the
 * routes are bound to it), and its static mode parses the YAML when the plugin registers, which
 * is the cost avoided below; what it would add (`app.swagger()`) is this function. So the
 * dependency was removed (docs/architecture.md).
 *
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
