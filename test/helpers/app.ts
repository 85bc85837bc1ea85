/**
 * Builds the app for one test file on its own fresh database: in-memory PGlite by default,
 * or a new database on the PostgreSQL server of DATABASE_URL (dropped in teardown).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import postgres from 'postgres';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';

export interface TestLike {
  teardown(fn: () => unknown): void;
}

/**
 * The variables that select a fresh database for one test file (dropped in teardown): in-memory
 * PGlite without a PostgreSQL DATABASE_URL; else a new database on that server, and when
 * DATABASE_DIRECT_URL is set too (DATABASE_URL is then a pooler in front of it: .ci/run's
 * PgBouncer leg) the same database by the direct URL, which also creates and drops it.
 */
export async function freshDatabaseEnv(
  t: TestLike,
): Promise<{ DATABASE_URL: string; DATABASE_DIRECT_URL?: string }> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl || serverUrl === 'memory://') return { DATABASE_URL: 'memory://' };
  const directServerUrl = process.env.DATABASE_DIRECT_URL || undefined;
  const adminUrl = directServerUrl ?? serverUrl;
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  t.teardown(async () => {
    const dropper = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await dropper.unsafe(`drop database if exists "${name}" with (force)`);
    await dropper.end();
  });
  const on = (server: string) => {
    const url = new URL(server);
    url.pathname = `/${name}`;
    return url.toString();
  };
  return directServerUrl
    ? { DATABASE_URL: on(serverUrl), DATABASE_DIRECT_URL: on(directServerUrl) }
    : { DATABASE_URL: on(serverUrl) };
}

/** A fresh database URL for one test file (freshDatabaseEnv's DATABASE_URL). */
export async function freshDatabaseUrl(t: TestLike): Promise<string> {
  return (await freshDatabaseEnv(t)).DATABASE_URL;
}

export async function testConfig(t: TestLike, env: Record<string, string> = {}): Promise<Config> {
  // Every request of a test file comes from one IP: the token endpoints' 30 per minute would
  // stop a file that exchanges many codes. test/hardening/rate-limit.test.ts sets it back.
  return loadConfig({
    NODE_ENV: 'test',
    ...(await freshDatabaseEnv(t)),
    RATE_LIMIT_TOKEN_MAX: '100000',
    ...env,
  });
}

export async function buildTestApp(
  t: TestLike,
  env: Record<string, string> = {},
): Promise<FastifyInstance> {
  const config = await testConfig(t, env);
  // As listening.ts: a loaded CI machine can take over Fastify's 10 s to open and migrate a
  // database; a test is about what the app answers, not how fast it starts.
  const app = await buildApp(config, { pluginTimeout: 120_000 });
  t.teardown(() => app.close());
  return app;
}
