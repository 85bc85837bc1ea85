/**
 * What the usage rollup (src/request-logs/usage.ts) adds to each logged request: the request
 * log's batch statement with the rollup's upsert (as shipped, RequestLogsRepository.insertMany)
 * against the same batch inserted alone (the statement before the rollup), alternating, on a
 * database of its own; and the in-memory sums (rollUp) per entry. Batches of 80 (the log's
 * statement under the bench's load: 20 a second) and 500 (the largest), from one app (the
 * bench's load) and from 100 apps (a shared server's worst case: 200 rollup rows a statement).
 *
 *   npm run bench:rollup                              # PostgreSQL of DATABASE_URL (a new database)
 *   npm run bench:rollup -- --batches 100             # batches per case (default 200)
 *   DATABASE_URL=memory:// npm run bench:rollup       # in-memory PGlite
 *
 * Prints one JSON object: per case, the median and p90 statement time of each variant and the
 * difference per logged request, in microseconds. Exits 1 on any failure.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { openDatabase, type Db } from '../../src/db/client.ts';
import {
  RequestLogsRepository,
  type RequestLogEntry,
} from '../../src/request-logs/request-logs-repository.ts';
import { rollUp } from '../../src/request-logs/usage.ts';
import { createServices } from '../../src/services.ts';
import { uuidV7 } from '../../src/lib/uuid-v7.ts';

const { values } = parseArgs({ options: { batches: { type: 'string', default: '200' } } });
const BATCHES = Number(values.batches);
const serverUrl = process.env.DATABASE_URL ?? 'memory://';

/** A database of its own on the PostgreSQL server (dropped at the end), or in-memory PGlite. */
async function database(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!serverUrl.startsWith('postgres')) return { url: 'memory://', drop: async () => {} };
  const name = `bench_rollup_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    },
  };
}

/** The request log's statement before the rollup (the batch inserted alone). */
async function insertAlone(db: Db, entries: string): Promise<void> {
  await db.execute(
    sql`insert into request_logs (app_id, environment, created_at, method, path, status, error_code,
          error_message, error_details, latency_ms, request_id, key_id, user_id, rate_limit)
        select app_id, environment, created_at, method, path, status, error_code, error_message,
          error_details, latency_ms, request_id, key_id, user_id, rate_limit
        from jsonb_to_recordset(${entries}::jsonb) as r(app_id uuid, environment text,
          created_at timestamptz, method text, path text, status int, error_code text, error_message text,
          error_details text, latency_ms int, request_id text, key_id uuid, user_id uuid, rate_limit text)`,
  );
}

const STATUSES = [200, 200, 200, 200, 200, 201, 200, 404, 400, 200, 429, 200];

function batch(apps: string[], size: number): RequestLogEntry[] {
  const now = new Date().toISOString();
  return Array.from({ length: size }, (_, i) => ({
    id: uuidV7(Date.parse(now)),
    app_id: apps[i % apps.length]!,
    environment: 'sandbox',
    created_at: now,
    method: 'GET',
    path: '/api/v1/listings/5a1d4c1e-8f0b-4d52-9a43-0c8f3f1b2a77',
    status: STATUSES[i % STATUSES.length]!,
    error_code: null,
    error_message: null,
    error_details: null,
    latency_ms: 3 + (i % 40),
    request_id: randomUUID(),
    key_id: null,
    user_id: null,
    rate_limit: '{"limit":300,"remaining":299,"reset":60}',
  }));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
const round = (x: number) => Math.round(x * 10) / 10;

async function main(): Promise<void> {
  const { url, drop } = await database();
  const handle = await openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  try {
    const db = handle.backgroundDb ?? handle.db;
    const services = createServices(handle.db);
    // 100 apps of four developers: one may own at most 25 (APPS_PER_OWNER).
    const apps: string[] = [];
    for (let o = 0; o < 4; o += 1) {
      const owner = await services.users.create({
        username: `rollup${o}`,
        password: 'a long password',
      });
      for (let i = 0; i < 25; i += 1)
        apps.push(
          (await services.apps.create({ ownerUsername: owner.username, name: `a${o}-${i}` })).id,
        );
    }
    const repository = new RequestLogsRepository(db);
    const cases = [];
    for (const [size, appCount] of [
      [80, 1],
      [500, 1],
      [80, 100],
      [500, 100],
    ] as const) {
      const alone: number[] = [];
      const withRollup: number[] = [];
      let sums = 0;
      let rows = 0;
      for (let i = 0; i < BATCHES + 10; i += 1) {
        const entries = batch(apps.slice(0, appCount), size);
        const json = `[${entries.map((e) => JSON.stringify(e)).join(',')}]`;
        const first = i % 2 === 0;
        for (const variant of first ? ['alone', 'rollup'] : ['rollup', 'alone']) {
          const start = process.hrtime.bigint();
          if (variant === 'alone') await insertAlone(db, json);
          else {
            const summed = rollUp(entries);
            const summedAt = process.hrtime.bigint();
            await repository.insertMany(json, JSON.stringify(summed));
            if (i >= 10) {
              sums += Number(summedAt - start) / 1000;
              rows += summed.length;
            }
          }
          const us = Number(process.hrtime.bigint() - start) / 1000;
          if (i >= 10) (variant === 'alone' ? alone : withRollup).push(us);
        }
      }
      cases.push({
        batch: size,
        apps: appCount,
        rollup_rows_per_statement: round(rows / BATCHES),
        statement_alone_us: { median: round(median(alone)), p90: round(p90(alone)) },
        statement_with_rollup_us: {
          median: round(median(withRollup)),
          p90: round(p90(withRollup)),
        },
        rollup_us_per_logged_request: round((median(withRollup) - median(alone)) / size),
        in_memory_sums_us_per_logged_request: round(sums / BATCHES / size),
      });
    }
    process.stdout.write(
      `${JSON.stringify(
        {
          at: new Date().toISOString(),
          database: url === 'memory://' ? 'PGlite (in memory)' : 'PostgreSQL',
          batches_per_case: BATCHES,
          cases,
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await handle.close();
    await drop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
