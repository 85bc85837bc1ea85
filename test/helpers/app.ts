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

/** A fresh database URL for one test file, and how to drop it. */
export async function freshDatabaseUrl(t: TestLike): Promise<string> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl || serverUrl === 'memory://') return 'memory://';
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  t.teardown(async () => {
    const dropper = postgres(serverUrl, { max: 1, onnotice: () => {} });
    await dropper.unsafe(`drop database if exists "${name}" with (force)`);
    await dropper.end();
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function testConfig(t: TestLike, env: Record<string, string> = {}): Promise<Config> {
  // Every request of a test file comes from one IP: the token endpoints' 30 per minute would
  // stop a file that exchanges many codes. test/hardening/rate-limit.test.ts sets it back.
  return loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: await freshDatabaseUrl(t),
    RATE_LIMIT_TOKEN_MAX: '100000',
    ...env,
  });
}

export async function buildTestApp(
  t: TestLike,
  env: Record<string, string> = {},
): Promise<FastifyInstance> {
  const config = await testConfig(t, env);
  const app = await buildApp(config);
  t.teardown(() => app.close());
  return app;
}
