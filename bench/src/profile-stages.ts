/**
 * The stages of a request that a CPU profile's busy time is divided into (issue #57 item 4), by
 * the source file a frame comes from (after the bundle's source map) or, for Ajv's validators
 * compiled at run time (no source), by their function's name. The first pattern that matches
 * names the stage; a frame matching none (Node, V8, src/lib helpers, fast-json-stringify's
 * compiled serializers) takes its caller's stage (profile-summary.ts `stages`).
 */
const BY_SOURCE: readonly (readonly [RegExp, string])[] = [
  [/find-my-way\//, 'router (find-my-way)'],
  [/\/ajv\/|\/ajv-formats\/|fast-uri|src\/plugins\/validation\.ts/, 'validation (Ajv)'],
  [/fast-json-stringify/, 'serialization'],
  [/@fastify\/rate-limit|rate-limit/, 'rate limit'],
  [/src\/plugins\/auth\.ts|src\/access\.ts|src\/apps\/key-cache/, 'auth'],
  [/src\/request-logs\//, 'request log'],
  [/prom-client|src\/plugins\/metrics\.ts/, 'metrics'],
  [/src\/listings\/etags\.ts/, 'ETag'],
  [/\/pino\/|pino-std-serializers|sonic-boom|fast-redact|thread-stream/, 'logging (pino)'],
  [
    /src\/plugins\/security-headers|src\/plugins\/cors|src\/plugins\/envelope|src\/plugins\/tracing/,
    'envelope, headers, tracing',
  ],
  [/src\/lib\/request-scope|src\/lib\/wake-ups/, 'request scope, wake-ups'],
  [
    /\/postgres\/src\/|src\/db\/gated-client|src\/db\/pool-gate|src\/db\/postgres\.ts/,
    'database driver, pool gate (postgres.js)',
  ],
  [
    /drizzle-orm|node_modules\/src\/|src\/db\/rows\.ts|src\/db\/unit-of-work/,
    'SQL building (Drizzle, rows.ts)',
  ],
  [/\/fastify\/|\/avvio\/|@fastify\/|light-my-request/, 'Fastify core (hooks, reply, request)'],
  [/(^|\/)src\/|\.\.\/src\//, 'handler (routes, services, repositories)'],
];

export function stageOf(functionName: string, source: string): string | undefined {
  if (!source) {
    if (/^validate\d*$/.test(functionName)) return 'validation (Ajv)';
    return undefined;
  }
  if (source.startsWith('node:')) return undefined;
  for (const [pattern, stage] of BY_SOURCE) if (pattern.test(source)) return stage;
  return undefined;
}
