/**
 * Security headers on every HTML page (the sign-in, consent and account pages, the portal,
 * /docs), with @fastify/helmet: HSTS when BASE_URL is https, no MIME sniffing, no framing,
 * no Referer to another site, cross-origin isolation of the window and of the page as a resource.
 *
 * The pages keep their own, stricter headers (src/web/html.ts pageHeaders: a per-page CSP,
 * X-Frame-Options DENY): a header the page set wins over helmet's default. Helmet's CSP is off
 * because each page writes its own: the pages' in html.ts, the Scalar reference's in
 * src/system/docs-plugin.ts (its inline script is allowed by hash, which a generic policy would not
 * know). JSON responses are left alone: they are not rendered.
 */
import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

export default fp(
  async function securityHeaders(app: FastifyInstance) {
    const https = new URL(app.config.baseUrl).protocol === 'https:';
    await app.register(helmet, {
      global: false,
      contentSecurityPolicy: false,
      strictTransportSecurity: https ? { maxAge: 31_536_000, includeSubDomains: true } : false,
      frameguard: { action: 'deny' },
      // same-origin, not no-referrer: a browser then sends this site's Origin on its own form
      // posts (under no-referrer it sends "null"), which the pages' Origin check needs
      // (src/web/web-plugin.ts); no other site is ever told a page's URL.
      referrerPolicy: { policy: 'same-origin' },
    });

    // Registered before the other onRequest hooks (src/app.ts), so reply.helmet exists even
    // when a later hook (the rate limiter's 429) ends the request.
    app.addHook('onSend', (_request, reply, payload, done) => {
      const type = reply.getHeader('content-type');
      if (
        typeof type === 'string' &&
        type.startsWith('text/html') &&
        typeof reply.helmet === 'function'
      ) {
        // Written on the raw response: Fastify's own headers (the page's) take precedence.
        // (helmet's middleware sets them synchronously.)
        reply.helmet();
      }
      done(null, payload);
    });
  },
  { name: 'security-headers', fastify: '5.x', dependencies: ['config'] },
);
