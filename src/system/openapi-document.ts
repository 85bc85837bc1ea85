/**
 * The OpenAPI document as served: @fastify/swagger in static mode, the Fastify ecosystem's
 * holder of a service's document, which decorates the app with `app.swagger()` (the object) and
 * `app.swagger({ yaml: true })` (its YAML, made on the first call and kept). Its own operation
 * answers GET /api/v1/openapi.json and .yaml with them (system-handlers.ts) and the /docs reference
 * reads them from there (docs-plugin.ts). The plugin registers no route of its own (since
 * @fastify/swagger 8 the pages are @fastify/swagger-ui's), so the binding of routes to the
 * document by operationId (src/plugins/operations.ts) is the only one.
 *
 * The document is handed over as an object, parsed from openapi/openapi.yaml by `npm run
 * generate` (src/generated/document.ts), never as `specification.path`: that makes the
 * plugin parse the YAML when it registers, 0.3 s or more before the first response
 * (`npm run bench`); importing the generated module costs a few milliseconds.
 */
import swagger, { type StaticDocumentSpec } from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { openapiDocument } from '../generated/document.ts';

type Flow = Record<string, unknown>;
interface SecurityScheme {
  flows?: Record<string, Flow>;
  [key: string]: unknown;
}
interface OpenApiDocument {
  servers?: { url: string; description?: string }[];
  components?: { securitySchemes?: Record<string, SecurityScheme>; [key: string]: unknown };
  [key: string]: unknown;
}

/** A flow with its URLs under the written server's origin moved to `baseUrl`. */
function flowAt(flow: Flow, written: string, baseUrl: string): Flow {
  const moved = { ...flow };
  for (const name of ['authorizationUrl', 'tokenUrl', 'refreshUrl']) {
    const url = moved[name];
    if (typeof url === 'string' && url.startsWith(`${written}/`))
      moved[name] = baseUrl.replace(/\/$/, '') + url.slice(written.length);
  }
  return moved;
}

/**
 * The document pointed at this deployment: `servers`, and the OAuth flows' URLs, which OpenAPI
 * 3.1 requires absolute and the file writes with its default server's origin. A copy along the
 * changed paths only: the generated object is shared by every app of the process (tests build
 * several, with different BASE_URLs), and the rest of it is never written.
 */
function documentAt(document: OpenApiDocument, baseUrl: string): OpenApiDocument {
  const written = document.servers?.[0]?.url;
  const served: OpenApiDocument = {
    ...document,
    servers: [{ url: baseUrl, description: 'This server' }],
  };
  const schemes = document.components?.securitySchemes;
  if (!written || !schemes) return served;
  const moved: Record<string, SecurityScheme> = {};
  for (const [name, scheme] of Object.entries(schemes)) {
    const flows = scheme.flows;
    moved[name] = flows
      ? {
          ...scheme,
          flows: Object.fromEntries(
            Object.entries(flows).map(([kind, flow]) => [kind, flowAt(flow, written, baseUrl)]),
          ),
        }
      : scheme;
  }
  served.components = { ...document.components, securitySchemes: moved };
  return served;
}

/**
 * The document's JSON as an app at `baseUrl` serves it, for code that has no app: the Express
 * peer of the bench (bench/src/peer-server.ts), the strict validator's test.
 */
export function servedDocument(baseUrl: string): { json(): Promise<string> } {
  return { json: async () => JSON.stringify(documentAt(openapiDocument, baseUrl)) };
}

export default fp(
  async function openapi(app: FastifyInstance) {
    const document = documentAt(openapiDocument, app.config.baseUrl);
    await app.register(swagger, {
      mode: 'static',
      // Typed for OpenAPI 2 and 3.0 only; the static mode serves any object as it is (3.1 here).
      specification: { document } as unknown as StaticDocumentSpec,
    });
  },
  { name: 'openapi-document', fastify: '5.x', dependencies: ['config'] },
);
