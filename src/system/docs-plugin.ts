/**
 * The API reference page at GET /docs (docs/api.md): Scalar's renderer, fed the document this
 * server serves (`app.swagger()`, @fastify/swagger: openapi-document.ts), so the page always
 * shows exactly the deployed contract (every operation, schema, example, security scheme and the
 * `webhooks` section). Scalar serves it to the page at /docs/openapi.json.
 *
 * Offline by construction: the page, its script and its styles come from this server
 * (/docs/, /docs/js/scalar.js, bundled in @scalar/fastify-api-reference); the web fonts that
 * Scalar would fetch from its CDN are turned off and the system fonts are used instead.
 * @scalar/fastify-api-reference is pinned to 1.46.4, the last release whose dependencies all
 * support Node 20 (from 1.47 they declare Node >= 22 and npm warns EBADENGINE on install);
 * test/system/docs.test.ts proves the page works and needs no network.
 *
 * Like the sign-in pages, /docs is an HTML page outside the document's operations, with a
 * Content-Security-Policy of its own (referencePolicy): helmet's generic one is off for every
 * page (src/plugins/security-headers.ts).
 */
import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

const DOCS_PATH = '/docs';

/** Headers of the reference's own answer that this server's reply sets itself. */
const HOP_HEADERS = new Set([
  'content-length',
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
]);

/** The inline scripts of a page: `<script>` elements without `src`. */
const INLINE_SCRIPT = /<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/gi;

/**
 * The reference page's policy: scripts from this server plus the page's own inline script (it
 * calls Scalar.createApiReference with our configuration), allowed by its hash, so no other
 * inline script runs; Scalar's styles, which its components insert at run time (hence
 * 'unsafe-inline' for styles only); images and fonts from here or inline; requests ("Test
 * Request", the document) to this server and to BASE_URL; no framing, plugins, forms or <base>.
 * No 'unsafe-eval': the one eval in Scalar's bundle is Zod's probe (`try { Function('') }`),
 * which falls back to validating without compiled code (test/system/docs.test.ts).
 */
function referencePolicy(html: string, baseUrl: string): string {
  const hashes = [...html.matchAll(INLINE_SCRIPT)].map(
    ([, script]) =>
      `'sha256-${createHash('sha256')
        .update(script ?? '')
        .digest('base64')}'`,
  );
  return [
    "default-src 'none'",
    `script-src 'self' ${hashes.join(' ')}`.trim(),
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    `connect-src 'self' ${new URL(baseUrl).origin}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * Scalar's module carries the page script as a 4 MB string: importing it costs about 0.3 s and
 * 40 MB of memory, which an API server that never serves /docs (or not yet) should not pay
 * before its first response (`npm run bench`). So the reference lives in a small Fastify
 * instance of its own, built on the first request under /docs and answering through inject().
 */
async function buildReference(app: FastifyInstance): Promise<FastifyInstance> {
  const { default: scalar } = await import('@scalar/fastify-api-reference');
  const reference = Fastify({ logger: false });
  await reference.register(scalar, {
    routePrefix: DOCS_PATH,
    configuration: {
      // What Scalar reads by itself when @fastify/swagger is registered on its own instance
      // (`fastify.swagger()`); this instance is a separate one, so it is handed over.
      content: () => app.swagger(),
      pageTitle: 'Marketplace Listings API reference',
      // No request to fonts.scalar.com: the reference must work with the network closed.
      withDefaultFonts: false,
      telemetry: false,
      // "Test Request" stays: it shows the security schemes (the Authentication box) and
      // sends requests to this server (same origin, no proxy). The separate full-screen
      // client adds nothing to that.
      hideClientButton: true,
      // On localhost Scalar adds its hosted AI agent and developer toolbar: network services,
      // not part of our reference.
      agent: { disabled: true },
      showDeveloperTools: 'never',
      showOperationId: true,
      defaultOpenAllTags: true,
      expandAllModelSections: false,
    },
  });
  await reference.ready();
  return reference;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * What the page shows before Scalar's 4 MB script has arrived, run and drawn the reference (3-5 s
 * on a first visit): the API's name and summary, that the reference is loading, and the document
 * itself, as HTML inside the element Scalar mounts on (its mount replaces it). No script: the
 * page's policy allows only Scalar's own.
 */
function firstPaint(info: { title?: string; summary?: string; version?: string }): string {
  const title = escapeHtml(info.title ?? 'API reference');
  return `<div id="app"><main class="docs-first-paint" style="font-family: system-ui, sans-serif;
 max-width: 46rem; margin: 3rem auto; padding: 0 1.5rem; line-height: 1.5; color: #1f2328">
<h1 style="font-size: 1.75rem; margin: 0 0 .5rem">${title} reference</h1>
<p style="margin: 0 0 1rem">${escapeHtml(info.summary ?? '')}</p>
<p role="status" style="margin: 0 0 1rem; color: #57606a">Loading the interactive reference…</p>
<p style="margin: 0">The OpenAPI document (version ${escapeHtml(info.version ?? '')}):
 <a href="/api/v1/openapi.json">openapi.json</a> · <a href="/api/v1/openapi.yaml">openapi.yaml</a></p>
<noscript><p>The interactive reference needs JavaScript; the document above has everything it shows.</p></noscript>
</main></div>`;
}

export default fp(
  async function docs(app: FastifyInstance) {
    let reference: Promise<FastifyInstance> | undefined;
    app.addHook('onClose', async () => {
      if (reference) await (await reference).close();
    });

    async function forward(request: FastifyRequest, reply: FastifyReply) {
      // A failed build is not kept: the next request tries again.
      reference ??= buildReference(app).catch((err: unknown) => {
        reference = undefined;
        throw err;
      });
      const answer = await (
        await reference
      ).inject({
        method: 'GET',
        url: request.url,
        headers: { host: request.headers.host ?? 'localhost' },
      });
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined && !HOP_HEADERS.has(name)) reply.header(name, value);
      }
      // The page and its 4 MB script change only with a deploy.
      reply.code(answer.statusCode).header('cache-control', 'public, max-age=300');
      if (!String(answer.headers['content-type']).startsWith('text/html'))
        return reply.send(answer.rawPayload);
      const html = answer.body.replace('<div id="app"></div>', () =>
        firstPaint(app.swagger().info as Parameters<typeof firstPaint>[0]),
      );
      reply.header('content-security-policy', referencePolicy(html, app.config.baseUrl));
      return reply.send(html);
    }

    app.get(DOCS_PATH, { logLevel: 'warn' }, forward);
    app.get(`${DOCS_PATH}/*`, { logLevel: 'warn' }, forward);
  },
  { name: 'docs', fastify: '5.x', dependencies: ['config', 'envelope', 'openapi-document'] },
);
