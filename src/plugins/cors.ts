/**
 * CORS (the "CORS" section of the OpenAPI document): /api/v1/* and the
 * authorization server metadata may be called from any origin, without cookies, with GET,
 * POST, PATCH and DELETE and the headers a client needs. Credentials are Bearer tokens sent
 * by script, never cookies, so `*` is safe and no origin list is kept. Nothing else gets CORS
 * headers: /oauth/token and /oauth/revoke are for servers (a client secret must never be in a
 * browser), and the pages are same-origin forms.
 *
 * Registered before the rate limiter: a preflight is answered here (204) and is not counted.
 * An OPTIONS request that is not a preflight falls through to the 405 of the envelope.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

const CORS_METHODS = ['GET', 'POST', 'PATCH', 'DELETE'];
const CORS_ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-None-Match'];
const CORS_EXPOSED_HEADERS = [
  'X-Request-Id',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Retry-After',
  'ETag',
];
/** Browsers may reuse a preflight answer this long (seconds; Chromium caps it at 7200). */
const CORS_MAX_AGE = 600;

function corsApplies(path: string): boolean {
  return (
    path === '/api/v1' ||
    path.startsWith('/api/v1/') ||
    path === '/.well-known/oauth-authorization-server'
  );
}

function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === 'OPTIONS' &&
    !!request.headers.origin &&
    !!request.headers['access-control-request-method']
  );
}

/**
 * One onRequest hook with constant headers, not @fastify/cors: the policy is the same for every
 * request it applies to, and that plugin's per-request delegator normalised its options on
 * every request (about 4% of a GET's CPU in `npm run bench`).
 */
export default fp(
  async function corsPlugin(app: FastifyInstance) {
    const actual = {
      'access-control-allow-origin': '*',
      'access-control-expose-headers': CORS_EXPOSED_HEADERS.join(', '),
    };
    const preflight = {
      'access-control-allow-origin': '*',
      'access-control-allow-methods': CORS_METHODS.join(', '),
      'access-control-allow-headers': CORS_ALLOWED_HEADERS.join(', '),
      'access-control-max-age': String(CORS_MAX_AGE),
    };
    // Callback hooks here and in the other per-request plugins: an async hook costs a promise
    // and a microtask per request for work that never waits.
    app.addHook('onRequest', (request, reply, done) => {
      const path = request.url.split('?', 1)[0]!;
      if (!corsApplies(path)) return done();
      if (request.method !== 'OPTIONS') {
        reply.headers(actual);
      } else if (isPreflight(request)) {
        reply.code(204).headers(preflight).send();
        return;
      }
      // An OPTIONS request that is not a preflight: the envelope's 405.
      done();
    });
  },
  { name: 'cors', fastify: '5.x', dependencies: ['envelope'] },
);
