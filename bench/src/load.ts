/**
 * The load generator, run as its own process so it never shares a CPU queue or a heap with
 * the server it measures: autocannon against one loopback URL for a bounded time. Paths and
 * bodies are given as lists and taken in turn, request after request.
 *
 *   node --import tsx bench/src/load.ts SPEC.json      (a LoadSpec; bodies can be large)
 *
 * Prints one JSON line (LoadResult) on stdout; exits non-zero if autocannon fails.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

export interface LoadSpec {
  /** http://127.0.0.1:PORT */
  origin: string;
  method: 'GET' | 'POST' | 'PATCH';
  paths: string[];
  bodies?: string[];
  headers?: Record<string, string>;
  /** Extra headers per request, taken in turn (each idempotent replay its own key). */
  headerVariants?: Record<string, string>[];
  connections: number;
  /** seconds */
  duration: number;
}

export interface LoadResult {
  requests: number;
  /** Completed requests per second over the run. */
  rps: number;
  /** Latency in milliseconds. */
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  durationS: number;
  /** Answers received in each whole second of the run, in order (a trend under load). */
  perSecond: number[];
}

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  let pathTurn = 0;
  let bodyTurn = 0;
  let headerTurn = 0;
  const headers = {
    ...(spec.bodies ? { 'content-type': 'application/json' } : {}),
    ...spec.headers,
  };
  const perSecond: number[] = [];
  // autocannon sends its first requests on the next turn of the event loop.
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.origin,
        connections: spec.connections,
        duration: spec.duration,
        pipelining: 1,
        timeout: 10,
        requests: [
          {
            method: spec.method,
            headers,
            setupRequest: (request) => {
              request.path = spec.paths[pathTurn++ % spec.paths.length]!;
              if (spec.bodies) request.body = spec.bodies[bodyTurn++ % spec.bodies.length]!;
              if (spec.headerVariants) {
                request.headers = {
                  ...headers,
                  ...spec.headerVariants[headerTurn++ % spec.headerVariants.length]!,
                };
              }
              return request;
            },
          },
        ],
      },
      (err, result) => {
        if (err) return reject(err);
        const statusCodes = Object.fromEntries(
          Object.entries(result.statusCodeStats ?? {}).map(([code, stat]) => [
            code,
            Number((stat as { count: number }).count),
          ]),
        );
        const completed = Object.values(statusCodes).reduce((a, b) => a + b, 0);
        resolve({
          requests: completed,
          rps: completed / result.duration,
          p50: result.latency.p50,
          p90: result.latency.p90,
          p99: result.latency.p99,
          mean: result.latency.average,
          max: result.latency.max,
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          statusCodes,
          durationS: result.duration,
          // The last second can be partial (autocannon stops on a timer).
          perSecond: Array.from(
            { length: Math.floor(result.duration) },
            (_, second) => perSecond[second] ?? 0,
          ),
        });
      },
    );
    instance.on('response', () => {
      const second = Math.floor((performance.now() - started) / 1000);
      perSecond[second] = (perSecond[second] ?? 0) + 1;
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const spec = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as LoadSpec;
  runLoad(spec).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (err: unknown) => {
      process.stderr.write(`load failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
