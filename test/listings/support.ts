/**
 * Shared by the listings tests: one app per test file, HTTP calls through app.inject,
 * envelope assertions (OpenAPI "Errors"), the recorded listing changes (the outbox), row counts.
 */
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import { buildApp } from '../../src/app.ts';
import { queryRows } from '../../src/db/rows.ts';
import { bearer, createDeveloper, createKey, type Developer } from '../helpers/accounts.ts';
import { testConfig, type TestLike } from '../helpers/app.ts';

/** A tap test (the root `t` or a subtest's). */
export type Asserts = Test;

/**
 * The app for one test file (as buildTestApp, on a fresh database). Rate limiting is out of the
 * way: these files send many requests. Fastify's default 10 s plugin timeout is too short for
 * PGlite's start and migrations on a loaded 2-core CI machine, hence the longer one.
 */
export async function listingsApp(
  t: TestLike,
  env: Record<string, string> = {},
): Promise<FastifyInstance> {
  const app = await buildApp(await testConfig(t, { RATE_LIMIT_MAX: '1000000', ...env }), {
    pluginTimeout: 120_000,
  });
  t.teardown(() => app.close());
  return app;
}

/** A parsed JSON answer; fields are probed freely by the tests. */
export type Json = any;

export interface Answer {
  status: number;
  body: Json;
  headers: Record<string, string | string[] | number | undefined>;
}

export interface CallOptions {
  /** An API key or token sent as a Bearer credential. */
  key?: string;
  /** A JS value sent as JSON, or a string sent verbatim as application/json. */
  body?: unknown;
  headers?: Record<string, string>;
}

export async function call(
  app: FastifyInstance,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  options: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = {
    ...(options.key ? bearer(options.key) : {}),
    ...options.headers,
  };
  let payload: string | undefined;
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  }
  const res = await app.inject({
    method,
    url,
    headers,
    ...(payload === undefined ? {} : { payload }),
  });
  let body: Json = null;
  try {
    body = res.body === '' ? null : JSON.parse(res.body);
  } catch {
    body = res.body;
  }
  return { status: res.statusCode, body, headers: res.headers };
}

/** The common envelope checks: version, request id equal to X-Request-Id. */
function checkMeta(t: Asserts, res: Answer, environment?: 'sandbox' | 'live'): void {
  t.equal(res.body?.meta?.version, 'v1', 'meta.version is v1');
  t.ok(
    typeof res.body?.meta?.request_id === 'string' && res.body.meta.request_id.length > 0,
    'meta.request_id is set',
  );
  t.equal(
    res.headers['x-request-id'],
    res.body?.meta?.request_id,
    'X-Request-Id equals meta.request_id',
  );
  if (environment)
    t.equal(res.body?.meta?.environment, environment, `meta.environment is ${environment}`);
}

/** A success envelope with the given status. */
export function expectOk(
  t: Asserts,
  res: Answer,
  status: number,
  environment?: 'sandbox' | 'live',
): Json {
  t.equal(
    res.status,
    status,
    `HTTP ${status}${res.status !== status ? `: ${JSON.stringify(res.body).slice(0, 400)}` : ''}`,
  );
  t.ok(res.body && 'data' in res.body, 'has data');
  t.equal(res.body?.error, undefined, 'has no error');
  checkMeta(t, res, environment);
  return res.body?.data;
}

/**
 * An error envelope with the given status and code; `path`, when given, must be named in details.
 */
export function expectError(
  t: Asserts,
  res: Answer,
  status: number,
  code: string,
  path?: string | RegExp,
): Json {
  t.equal(
    res.status,
    status,
    `HTTP ${status}${res.status !== status ? `: ${JSON.stringify(res.body).slice(0, 400)}` : ''}`,
  );
  t.equal(res.body?.error?.code, code, `error.code is ${code}`);
  t.equal(typeof res.body?.error?.message, 'string', 'error.message is a string');
  t.equal(res.body?.data, undefined, 'has no data');
  checkMeta(t, res);
  if (path !== undefined) {
    const paths: string[] = (res.body?.error?.details ?? []).map((d: { path: string }) => d.path);
    const named = paths.some((p) => (typeof path === 'string' ? p === path : path.test(p)));
    t.ok(named, `details name ${String(path)} (got ${JSON.stringify(paths)})`);
  }
  return res.body?.error;
}

/** A listing change as the outbox recorded it (its event's type and listing). */
export interface RecordedChange {
  type: 'listing.created' | 'listing.updated' | 'listing.archived';
  listing: Json;
}

/**
 * The listing changes recorded since the last take, in order: the outbox's listing events
 * (webhook_events, written by each change's own statement), whichever app they went to.
 */
export function recordChanges(app: FastifyInstance): { take(): Promise<RecordedChange[]> } {
  const seen = new Set<string>();
  return {
    async take() {
      const rows = await queryRows<{ id: string; type: RecordedChange['type']; data: string }>(
        app.db,
        sql`select id, type, data from webhook_events
            where type in ('listing.created', 'listing.updated', 'listing.archived')
            order by created_at`,
      );
      const fresh = rows.filter((row) => !seen.has(row.id));
      for (const row of fresh) seen.add(row.id);
      return fresh.map((row) => ({ type: row.type, listing: JSON.parse(row.data).listing }));
    },
  };
}

export async function countListings(app: FastifyInstance, sellerId?: string): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    app.db,
    sellerId === undefined
      ? sql`select count(*)::int as n from listings`
      : sql`select count(*)::int as n from listings where seller_id = ${sellerId}`,
  );
  return row!.n;
}

/** A developer with a sandbox key and (milestone completed) a live key. */
export interface Seller extends Developer {
  sandbox: string;
  live: string;
}

export async function createSeller(
  app: FastifyInstance,
  options: { live?: boolean } = {},
): Promise<Seller> {
  const developer = await createDeveloper(app);
  const sandbox = await createKey(app, developer, 'sandbox');
  const live = options.live === false ? '' : await createKey(app, developer, 'live');
  return { ...developer, sandbox, live };
}

export const PHOTO = 'https://images.example.com/listings/photo.jpg';
