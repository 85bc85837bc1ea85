/**
 * Features a profiling run leaves out, to measure what each costs per request (docs/performance.md,
 * "Where each microsecond goes"). Only a caller of buildApp sets them (scripts/bench/feature-
 * server.ts); no configuration or environment variable reaches them, so every server built from
 * src/server.ts has them all on (the empty set).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * What leaving each out means: cors, security-headers and rate-limit are not registered;
 * envelope: no X-Request-Id header hook (meta.request_id stays); etag: listing reads neither
 * compute an ETag nor read If-None-Match (no ETag, Cache-Control or Vary); serialization: the
 * routes' compiled response serializers are replaced by JSON.stringify. The request id, logging,
 * metrics and the request log are off through buildApp's server options and the config instead.
 */
export type Feature =
  'cors' | 'envelope' | 'etag' | 'rate-limit' | 'security-headers' | 'serialization';

export const FEATURES: readonly Feature[] = [
  'cors',
  'envelope',
  'etag',
  'rate-limit',
  'security-headers',
  'serialization',
];

declare module 'fastify' {
  interface FastifyInstance {
    /** The features left out of this app; empty except in a profiling run. */
    without: ReadonlySet<Feature>;
  }
}

export default fp(
  async function featureSwitches(app: FastifyInstance, options: { without: ReadonlySet<Feature> }) {
    app.decorate('without', options.without);
  },
  { name: 'feature-switches', fastify: '5.x' },
);
