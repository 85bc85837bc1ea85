/**
 * CORS (spec §9 history, the "CORS" section of the OpenAPI document): /api/v1/* and the
 * authorization server metadata may be called from any origin, without cookies, with GET,
 * POST, PATCH and DELETE and the headers a client needs. Credentials are Bearer tokens sent
 * by script, never cookies, so `*` is safe and no origin list is kept. Nothing else gets CORS
 * headers: /oauth/token and /oauth/revoke are for servers (a client secret must never be in a
 * browser), and the pages are same-origin forms.
 *
 * Registered before the rate limiter: a preflight is answered here (204) and is not counted.
 * An OPTIONS request that is not a preflight falls through to the 405 of the envelope.
 */
import cors from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export const CORS_METHODS = ['GET', 'POST', 'PATCH', 'DELETE'];
export const CORS_ALLOWED_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key'];
export const CORS_EXPOSED_HEADERS = ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After'];
/** Browsers may reuse a preflight answer this long (seconds; Chromium caps it at 7200). */
export const CORS_MAX_AGE = 600;

export function corsApplies(path: string): boolean {
  return path === '/api/v1' || path.startsWith('/api/v1/') || path === '/.well-known/oauth-authorization-server';
}

function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && !!request.headers.origin && !!request.headers['access-control-request-method'];
}

export default fp(
  async function corsPlugin(app: FastifyInstance) {
    const enabled = {
      origin: '*',
      credentials: false,
      methods: CORS_METHODS,
      allowedHeaders: CORS_ALLOWED_HEADERS,
      exposedHeaders: CORS_EXPOSED_HEADERS,
      maxAge: CORS_MAX_AGE,
      strictPreflight: false,
    };
    await app.register(cors, {
      hideOptionsRoute: true,
      delegator: (request, callback) => {
        const path = request.url.split('?')[0] ?? request.url;
        const applies = corsApplies(path) && (request.method !== 'OPTIONS' || isPreflight(request));
        callback(null, applies ? enabled : { origin: false });
      },
    });
  },
  { name: 'cors', fastify: '5.x', dependencies: ['envelope'] },
);
