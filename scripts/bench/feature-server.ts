/**
 * The API with named features left out, for `npm run bench:features` (features.ts): the
 * configuration is loaded as src/server.ts loads it, then BENCH_WITHOUT (a comma-separated list,
 * read only here) takes features out programmatically. What "out" means for each is FEATURE_OFF
 * in features.ts; none of it is reachable from a production configuration.
 *
 * Env: as the server's, plus BENCH_WITHOUT. Listens on PORT (127.0.0.1).
 */
import type { FastifyServerOptions } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { FEATURES, type Feature } from '../../src/plugins/feature-switches.ts';

/** Features switched off outside the app's own set: server options and configuration. */
const OUTSIDE = ['request-id', 'logging', 'metrics', 'request-log'] as const;
export type BenchFeature = Feature | (typeof OUTSIDE)[number];

const names = (process.env.BENCH_WITHOUT ?? '').split(',').filter(Boolean);
for (const name of names)
  if (![...FEATURES, ...OUTSIDE].includes(name as BenchFeature))
    throw new Error(`BENCH_WITHOUT: unknown feature ${name}`);
const off = new Set(names as BenchFeature[]);

let config = loadConfig();
if (off.has('metrics')) config = { ...config, metricsToken: null };
if (off.has('request-log')) config = { ...config, requestLogs: false };
const overrides: FastifyServerOptions = {};
// Fastify's own request ids: a counter (req-1, req-2...) instead of a random UUID.
if (off.has('request-id')) overrides.genReqId = undefined;
// No logger at all, against the production level (LOG_LEVEL=warn: nothing is written per request).
if (off.has('logging')) Object.assign(overrides, { logger: false, childLoggerFactory: undefined });

const app = await buildApp(
  config,
  overrides,
  new Set(FEATURES.filter((feature) => off.has(feature))),
);
await app.listen({ port: config.port, host: config.host });
for (const signal of ['SIGTERM', 'SIGINT'])
  process.once(signal, () => void app.close().then(() => process.exit(0)));
