import { readFile } from 'node:fs/promises';
import { projectFile } from '../project-files.ts';

const openapiPath = projectFile('openapi', 'openapi.yaml');

interface OpenApiDocument {
  servers?: { url: string; description?: string }[];
  components?: {
    securitySchemes?: Record<
      string,
      { type?: string; flows?: Record<string, Record<string, unknown>> }
    >;
  };
  [key: string]: unknown;
}

/**
 * Points the document at this deployment: `servers`, and the OAuth flows' URLs, which OpenAPI
 * 3.1 requires absolute and the file writes with its default server's origin.
 */
function atBaseUrl(document: OpenApiDocument, baseUrl: string): void {
  const written = document.servers?.[0]?.url;
  document.servers = [{ url: baseUrl, description: 'This server' }];
  if (!written) return;
  for (const scheme of Object.values(document.components?.securitySchemes ?? {})) {
    for (const flow of Object.values(scheme.flows ?? {})) {
      for (const name of ['authorizationUrl', 'tokenUrl', 'refreshUrl']) {
        const url = flow[name];
        if (typeof url === 'string' && url.startsWith(`${written}/`))
          flow[name] = baseUrl.replace(/\/$/, '') + url.slice(written.length);
      }
    }
  }
}

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
      const document = parse(await readFile(openapiPath, 'utf8')) as OpenApiDocument;
      atBaseUrl(document, baseUrl);
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
