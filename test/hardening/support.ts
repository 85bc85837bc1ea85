/**
 * Shared by the hardening tests: an app whose JSON log lines are kept for assertions, and a
 * developer with keys.
 */
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { loggerOptions } from '../../src/lib/logging.ts';
import { testConfig, type TestLike } from '../helpers/app.ts';

export interface LoggedApp {
  app: FastifyInstance;
  /** Every log line so far, parsed. */
  logs(): Record<string, any>[];
  /** The raw text of every log line so far. */
  text(): string;
}

/**
 * buildTestApp, but logging at `level` into memory (the production logger options, redaction
 * included).
 */
export async function buildLoggedApp(
  t: TestLike,
  env: Record<string, string> = {},
  level = 'info',
): Promise<LoggedApp> {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  // A database URL of the test's own (a private server) is used as given.
  const config = env.DATABASE_URL
    ? loadConfig({ NODE_ENV: 'test', ...env })
    : await testConfig(t, env);
  const app = await buildApp(config, { logger: { ...loggerOptions(level), stream } });
  t.teardown(() => app.close());
  return {
    app,
    logs: () =>
      lines.flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, any>];
        } catch {
          return [];
        }
      }),
    text: () => lines.join('\n'),
  };
}

export const rateHeaders = (headers: Record<string, unknown>) => ({
  limit: headers['ratelimit-limit'] === undefined ? undefined : Number(headers['ratelimit-limit']),
  remaining:
    headers['ratelimit-remaining'] === undefined
      ? undefined
      : Number(headers['ratelimit-remaining']),
  reset: headers['ratelimit-reset'] === undefined ? undefined : Number(headers['ratelimit-reset']),
  retryAfter: headers['retry-after'] === undefined ? undefined : Number(headers['retry-after']),
});
