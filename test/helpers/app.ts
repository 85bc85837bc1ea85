/**
 * Builds the app for one test file on its own fresh database: in-memory PGlite by default,
 * or a new database on the PostgreSQL server of DATABASE_URL (dropped in teardown), copied from
 * a migrated template (migratedTemplate below).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import postgres from 'postgres';
import { buildApp } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { migrationsFolder } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrations.ts';
import { SESSION_OPTIONS } from '../../src/db/postgres.ts';

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
  /** Empty, not migrated: for the tests of a migration (helpers/migrations.ts). */
  { empty = false }: { empty?: boolean } = {},
): Promise<{ DATABASE_URL: string; DATABASE_DIRECT_URL?: string }> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl || serverUrl === 'memory://') return { DATABASE_URL: 'memory://' };
  const directServerUrl = process.env.DATABASE_DIRECT_URL || undefined;
  const adminUrl = directServerUrl ?? serverUrl;
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    if (empty) await admin.unsafe(`create database "${name}"`);
    else
      await admin.unsafe(
        `create database "${name}" template "${await migratedTemplate(adminUrl)}"`,
      );
  } finally {
    await admin.end();
  }
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
export async function freshDatabaseUrl(
  t: TestLike,
  options?: { empty?: boolean },
): Promise<string> {
  return (await freshDatabaseEnv(t, options)).DATABASE_URL;
}

/**
 * The name of a database on `adminUrl`'s server migrated with drizzle/ (src/db/migrations.ts,
 * as the server's start does), which a test file's database is created from (`create database
 * ... template`): copying it costs a fraction of running the 20-odd migrations for each file.
 * Named by the server URL's database (in CI, that run's own: .ci/run drops its templates at the
 * end) and by a digest of the migrations, so a changed migration makes a new template and a stale
 * one is never used. The first process to need it builds it under an advisory lock, aside, and
 * renames it: another process sees the whole template or none. Made once per process.
 */
let template: Promise<string> | undefined;
function migratedTemplate(adminUrl: string): Promise<string> {
  template ??= buildTemplate(adminUrl).catch((error: unknown) => {
    template = undefined;
    throw error;
  });
  return template;
}

async function buildTemplate(adminUrl: string): Promise<string> {
  const hash = createHash('sha256');
  const files = readdirSync(migrationsFolder).filter((file) => file.endsWith('.sql'));
  for (const file of [...files.sort(), join('meta', '_journal.json')])
    hash.update(`${file}\n`).update(readFileSync(join(migrationsFolder, file)));
  const scope = new URL(adminUrl).pathname
    .slice(1)
    .replace(/[^a-z0-9_]/gi, '_')
    .slice(0, 24);
  const name = `t_template_${scope}_${hash.digest('hex').slice(0, 16)}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const exists = async () =>
    (await admin`select 1 from pg_database where datname = ${name}`).length > 0;
  try {
    if (await exists()) return name;
    await admin`select pg_advisory_lock(7424090)`;
    try {
      if (await exists()) return name;
      const aside = `${name}_${randomBytes(4).toString('hex')}`;
      await admin.unsafe(`create database "${aside}"`);
      try {
        const url = new URL(adminUrl);
        url.pathname = `/${aside}`;
        await migrate(url.toString(), SESSION_OPTIONS);
        await admin.unsafe(`alter database "${aside}" rename to "${name}"`);
      } catch (error) {
        await admin.unsafe(`drop database if exists "${aside}" with (force)`);
        throw error;
      }
      return name;
    } finally {
      await admin`select pg_advisory_unlock(7424090)`;
    }
  } finally {
    await admin.end();
  }
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
