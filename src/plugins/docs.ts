/**
 * The API reference page at GET /docs (CONTRACT §8): Scalar's renderer, fed the document this
 * server serves at /api/v1/openapi.json, so the page always shows exactly the deployed contract
 * (every operation, schema, example, security scheme and the `webhooks` section).
 *
 * Offline by construction: the page, its script and its styles come from this server
 * (/docs/, /docs/js/scalar.js, bundled in @scalar/fastify-api-reference); the web fonts that
 * Scalar would fetch from its CDN are turned off and the system fonts are used instead.
 * @scalar/fastify-api-reference is pinned to 1.72.1: later releases did not install here
 * (shared/TOOLING.md), and test/plugins/docs.test.ts proves the page needs no network.
 *
 * Like the sign-in pages, /docs is an HTML page outside the document's operations.
 */
import scalar from '@scalar/fastify-api-reference';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

export const DOCS_PATH = '/docs';
export const DOCUMENT_PATH = '/api/v1/openapi.json';

export default fp(
  async function docs(app: FastifyInstance) {
    await app.register(scalar, {
      routePrefix: DOCS_PATH,
      logLevel: 'warn',
      hooks: {
        // The page and its 4 MB script change only with a deploy.
        onRequest: async (_request, reply) => {
          reply.header('cache-control', 'public, max-age=300');
        },
      },
      configuration: {
        url: DOCUMENT_PATH,
        pageTitle: 'Marketplace Listings API reference',
        // No request to fonts.scalar.com: the reference must work with the network closed.
        withDefaultFonts: false,
        telemetry: false,
        // "Test Request" stays: it shows the security schemes (the Authentication box) and
        // sends requests to this server (same origin, no proxy). The separate full-screen
        // client adds nothing to that.
        hideClientButton: true,
        // On localhost Scalar adds its hosted AI agent, MCP generator and developer toolbar:
        // network services, not part of our reference.
        agent: { disabled: true },
        mcp: { disabled: true },
        showDeveloperTools: 'never',
        showOperationId: true,
        defaultOpenAllTags: true,
        expandAllModelSections: false,
      },
    });
  },
  { name: 'docs', fastify: '5.x', dependencies: ['envelope'] },
);
