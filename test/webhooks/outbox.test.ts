/**
 * The outbox is durable (docs/webhooks.md): an event recorded by an app that closes before
 * delivering it is delivered by the next app on the same database; and several workers on one
 * database never send the same attempt twice (on PostgreSQL: two apps with their own
 * connection pools, as two server processes would have; on PGlite, which is single-process,
 * two workers over the one connection).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { DeliveryWorker } from '../../src/webhooks/delivery-worker.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, createEndpoint, startReceiver } from './support.ts';

/** One database for the whole file: a fresh PostgreSQL database, or a PGlite directory. */
async function databaseEnv(): Promise<Record<string, string>> {
  const database = await freshDatabaseEnv(t);
  if (database.DATABASE_URL !== 'memory://') return database;
  const parent = mkdtempSync(join(tmpdir(), 'webhooks-outbox-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  return { PGLITE_DIR: join(parent, 'db') };
}

const env: Record<string, string> = {
  NODE_ENV: 'test',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  RATE_LIMIT_MAX: '1000000',
  ...(await databaseEnv()),
};
const onPostgres = env.DATABASE_URL !== undefined;
const open = (extra: Record<string, string> = {}) => buildApp(loadConfig({ ...env, ...extra }));
const receiver = await startReceiver(t);
/**
 * The app running after the restart; the second test reuses it (opening a PGlite directory is
 * slow).
 */
let current: FastifyInstance;

t.test('an event recorded before a restart is delivered after it', async (t) => {
  const first = await open({ WEBHOOK_WORKER: 'false' });
  const dev = await createDeveloper(first);
  const key = await createKey(first, dev, 'sandbox');
  await createEndpoint(first, receiver, { appId: dev.appId, path: '/restart' });
  const created = await api(
    first,
    'POST',
    '/api/v1/listings',
    key,
    listingBody({ external_id: 'before-restart' }),
  );
  t.equal(created.status, 201);
  await first.close(); // the process "dies" right after answering: nothing was sent
  t.equal(receiver.to('/restart').length, 0, 'nothing delivered before the restart');

  current = await open();
  const got = await waitUntil('the delivery after the restart', () => receiver.to('/restart')[0]);
  t.equal(got.verifyError, null);
  t.match(got.event, {
    type: 'listing.created',
    data: { listing: { id: created.body.data.id, external_id: 'before-restart' } },
  });
});

t.test('a database that flaps while it goes down is one outage in the logs', async (t) => {
  // PostgreSQL's fast shutdown terminates connections one by one: a pass on a connection not
  // yet closed can work between two that fail. The worker logs the outage's start once, and
  // its end only once passes have kept working for a poll interval.
  const results = ['fail', 'fail', 'work', 'fail', 'fail', 'work', 'fail'];
  let passes = 0;
  class Flapping extends DeliveriesRepository {
    override async claim(...args: Parameters<DeliveriesRepository['claim']>) {
      const result = results[passes++] ?? 'work';
      if (result === 'fail') throw new Error('connection terminated (injected)');
      return super.claim(...args);
    }
  }
  const lines: { level: string; event: string; at: number }[] = [];
  const record =
    (level: string) =>
    (obj: unknown): void => {
      const event = (obj as { event?: string } | null)?.event;
      if (event) lines.push({ level, event, at: Date.now() });
    };
  const pollIntervalMs = 100;
  const worker = new DeliveryWorker(new Flapping(current.db), {
    timeoutMs: 5000,
    retryScheduleS: [1],
    allowPrivateNetworks: true,
    pollIntervalMs,
    log: { error: record('error'), warn: record('warn'), info: record('info'), debug: () => {} },
  });
  worker.start();
  t.teardown(() => worker.stop());
  await waitUntil(
    'the outage to end after the last failing pass',
    () => passes > results.length && lines.at(-1)?.event === 'webhook_worker_up',
    { timeoutMs: 10_000 },
  );
  const downs = lines.filter((l) => l.event === 'webhook_worker_down');
  const ups = lines.filter((l) => l.event === 'webhook_worker_up');
  t.equal(downs.length, 1, 'the outage starts once, despite passes that worked inside it');
  t.equal(downs[0]?.level, 'error', 'as an error');
  t.equal(ups.length, 1, 'and ends once');
  const upAt = passes;
  await waitUntil('three more passes', () => passes >= upAt + 3);
  t.equal(lines.length, 2, 'nothing more once passes work');
});

t.test('several workers never send one attempt twice', async (t) => {
  const a = current;
  t.teardown(() => a.close());
  let b: FastifyInstance | null = null;
  let extra: DeliveryWorker | null = null;
  if (onPostgres) {
    b = await open();
    t.teardown(() => b!.close());
  } else {
    extra = new DeliveryWorker(new DeliveriesRepository(a.db), {
      timeoutMs: 5000,
      retryScheduleS: [1],
      allowPrivateNetworks: true,
    });
    extra.start();
    t.teardown(() => extra!.stop());
  }
  // Stop a's worker while recording so that both workers race for the same backlog.
  await a.webhookWorker!.stop();
  await b?.webhookWorker!.stop();

  // widen the window between claim and outcome
  receiver.reply = () => ({ status: 200, delayMs: 20 });
  const dev = await createDeveloper(a);
  const key = await createKey(a, dev, 'sandbox');
  await createEndpoint(a, receiver, { appId: dev.appId, path: '/race-1' });
  await createEndpoint(a, receiver, { appId: dev.appId, path: '/race-2' });
  const batch = (n: number, prefix: string) => ({
    items: Array.from({ length: n }, (_, i) => listingBody({ external_id: `${prefix}-${i}` })),
  });
  t.equal((await api(a, 'POST', '/api/v1/listings/batch', key, batch(25, 'x'))).status, 200);
  t.equal((await api(a, 'POST', '/api/v1/listings/batch', key, batch(15, 'y'))).status, 200);
  const expected = 80; // 40 events x 2 endpoints

  a.webhookWorker!.start();
  b?.webhookWorker!.start();
  await waitUntil(
    'every delivery',
    () => receiver.to('/race-1').length + receiver.to('/race-2').length >= expected,
    { timeoutMs: 30_000 },
  );
  // Every outcome recorded: a second send of an attempt would have claimed it again first.
  const outcomes = () =>
    queryRows<{ n: number; max: number; done: number }>(
      a.db,
      sql`select count(*)::int as n, max(attempts)::int as max, count(*) filter (where status = 'succeeded')::int as done
        from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id where ep.app_id = ${dev.appId}`,
    );
  const [row] = await waitUntil('every outcome recorded', async () => {
    const rows = await outcomes();
    // A second attempt anywhere ends the wait too: the assertion below says what went wrong.
    return rows[0]!.done >= expected || rows[0]!.max > 1 ? rows : undefined;
  });

  const ids = [...receiver.to('/race-1'), ...receiver.to('/race-2')].map((r) => r.event!.id);
  t.equal(ids.length, expected, `${expected} requests`);
  t.equal(new Set(ids).size, expected, 'each delivery id exactly once');
  t.strictSame(
    row,
    { n: expected, max: 1, done: expected },
    'every delivery succeeded at its first attempt',
  );
});
