/**
 * What one request of each kind writes to PostgreSQL, for the capacity model (docs/scaling.md):
 * the growth of each table with its indexes and the WAL the cluster wrote, per request, after
 * `--requests` requests of a kind on a database of its own (dropped at the end). The app runs
 * in this process (app.inject: the same plugins, repositories and request log as `npm start`,
 * without the sockets, which write nothing to the database), with one sandbox webhook endpoint
 * so that each change records its event and one delivery (the delivery worker is off: an
 * attempt's row is the webhook bench's subject, not this one's).
 *
 *   DATABASE_URL=postgres://... npm run bench:volume [-- --requests 2000]
 *
 * WAL is the cluster's: run it on a PostgreSQL that nothing else writes to meanwhile (the
 * figures in docs/scaling.md came from a private cluster). Prints one JSON object.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { FastifyInstance, InjectOptions } from 'fastify';
import postgres, { type Sql } from 'postgres';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { listingBody } from './scenarios.ts';
import { createBenchDatabase } from './seed.ts';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '2000' } } });
const REQUESTS = Number(values.requests);
const CONCURRENCY = 20;
const API = '/api/v1';
const TABLES = [
  'listings',
  'webhook_events',
  'webhook_deliveries',
  'request_logs',
  'request_usage',
];

const serverUrl = process.env.DATABASE_URL;
if (!serverUrl?.startsWith('postgres')) {
  console.error('DATABASE_URL must name a PostgreSQL server (a database of its own is made)');
  process.exit(1);
}

interface Kind {
  name: string;
  request: (n: number) => InjectOptions;
}

async function snapshot(sql: Sql): Promise<{ wal: string; sizes: Record<string, number> }> {
  const [row] = await sql<{ wal: string }[]>`select pg_current_wal_lsn()::text as wal`;
  const sizes: Record<string, number> = {};
  for (const table of TABLES) {
    // A partitioned table has no storage of its own: the sum of its partitions' (and of the
    // table itself, for one that is not partitioned).
    const [size] = await sql<{ bytes: string | null }[]>`
      select sum(pg_total_relation_size(relid))::text as bytes
      from pg_partition_tree(to_regclass(${table}))`;
    sizes[table] = Number(size?.bytes ?? 0);
  }
  return { wal: row!.wal, sizes };
}

async function main(): Promise<void> {
  const database = await createBenchDatabase(serverUrl!);
  const sql = postgres(database.url, { max: 1, onnotice: () => {} });
  let app: FastifyInstance | undefined;
  try {
    const config = loadConfig({
      NODE_ENV: 'production',
      DATABASE_URL: database.url,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '1000000',
      SESSION_SECRET: randomUUID() + randomUUID(),
      BASE_URL: 'http://127.0.0.1:3000',
      WEBHOOK_WORKER: 'false',
      SAVED_SEARCH_MATCHER: 'false',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    });
    app = await buildApp(config);
    const services = app.services;
    const user = await services.users.create({
      username: 'volume_dev',
      password: 'volume-password-not-secret',
      displayName: 'Volume Developer',
    });
    const owned = await services.apps.create({ ownerUsername: user.username, name: 'Volume' });
    const key = (await services.keys.create({ appId: owned.id, env: 'sandbox' })).key;
    await services.endpoints.create({
      appId: owned.id,
      env: 'sandbox',
      url: 'https://127.0.0.1:9/hooks',
    });
    const auth = { authorization: `Bearer ${key}` };

    const created: string[] = [];
    const kinds: Kind[] = [
      {
        name: 'POST /listings (sandbox key, Idempotency-Key)',
        request: (n) => ({
          method: 'POST',
          url: `${API}/listings`,
          headers: { ...auth, 'idempotency-key': randomUUID() },
          payload: listingBody(n),
        }),
      },
      {
        name: 'PATCH /listings/{id}',
        request: (n) => ({
          method: 'PATCH',
          url: `${API}/listings/${created[n % created.length]}`,
          headers: auth,
          payload: { price_cents: 5000 + n },
        }),
      },
      {
        name: 'GET /listings/{id} (sandbox key)',
        request: (n) => ({
          method: 'GET',
          url: `${API}/listings/${created[n % created.length]}`,
          headers: auth,
        }),
      },
      {
        name: 'GET /listings (anonymous)',
        request: () => ({ method: 'GET', url: `${API}/listings?limit=24` }),
      },
    ];

    // Twice over: the first pass after the database was made (CREATE DATABASE checkpoints) logs
    // every page it first touches in full (full_page_writes); the second shows the same
    // requests within one checkpoint's cycle.
    const results = [];
    for (const [pass, kind] of [
      ...kinds.map((k) => [1, k] as const),
      ...kinds.map((k) => [2, k] as const),
    ]) {
      const before = await snapshot(sql);
      for (let n = 0; n < REQUESTS; n += CONCURRENCY) {
        const answers = await Promise.all(
          Array.from({ length: Math.min(CONCURRENCY, REQUESTS - n) }, (_, i) =>
            app!.inject(kind.request(n + i)),
          ),
        );
        for (const answer of answers) {
          if (answer.statusCode >= 300) throw new Error(`${kind.name}: ${answer.body}`);
          if (kind.name.startsWith('POST'))
            created.push(answer.json<{ data: { id: string } }>().data.id);
        }
      }
      // The request log writes in batches: wait until the last one is in.
      await waitForLoggedRequests(sql);
      const after = await snapshot(sql);
      const [wal] = await sql<{ bytes: string }[]>`
        select pg_wal_lsn_diff(${after.wal}::pg_lsn, ${before.wal}::pg_lsn)::text as bytes`;
      const perRequest = (bytes: number) => Math.round(bytes / REQUESTS);
      results.push({
        kind: kind.name,
        pass,
        requests: REQUESTS,
        walBytesPerRequest: perRequest(Number(wal!.bytes)),
        tableBytesPerRequest: Object.fromEntries(
          TABLES.map((t) => [t, perRequest(after.sizes[t]! - before.sizes[t]!)]),
        ),
      });
    }
    const [version] = await sql<{ v: string }[]>`select version() as v`;
    console.log(
      JSON.stringify(
        { at: new Date().toISOString(), postgres: version!.v, concurrency: CONCURRENCY, results },
        null,
        2,
      ),
    );
  } finally {
    await app?.close();
    await sql.end({ timeout: 5 });
    await database.drop();
  }
}

/** Resolves once the request log's row count stops growing for half a second. */
async function waitForLoggedRequests(sql: Sql): Promise<void> {
  let lastLogged = -1;
  for (let i = 0; i < 100; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const [row] = await sql<{ n: string }[]>`select count(*)::text as n from request_logs`;
    const logged = Number(row!.n);
    if (logged === lastLogged) return;
    lastLogged = logged;
  }
  throw new Error('the request log kept growing for 50 s');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
