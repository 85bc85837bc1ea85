/**
 * An idle delivery worker polls at its interval (a second; src/webhooks/delivery-worker.ts), not
 * as fast as it can: with nothing pending, "when is the next attempt due" answers none, not "now".
 * SQL's greatest(0, null) is 0, and that answer had every idle server run a claim transaction
 * (seven statements) every 25 ms.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { DeliveriesRepository } from '../../src/webhooks/deliveries-repository.ts';
import { DeliveryWorker } from '../../src/webhooks/delivery-worker.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, createEndpoint, startReceiver, webhooksApp } from './support.ts';

const app = await webhooksApp(t, { WEBHOOK_WORKER: 'false' });
const receiver = await startReceiver(t);
const deliveries = new DeliveriesRepository(app.db);

t.test(
  'the next attempt: none while nothing is pending, then when the earliest is due',
  async (t) => {
    t.equal(await deliveries.nextDueInMs(), null, 'an empty outbox has nothing due');
    const dev = await createDeveloper(app);
    const key = await createKey(app, dev, 'sandbox');
    await createEndpoint(app, receiver, { appId: dev.appId, path: '/idle' });
    const created = await api(app, 'POST', '/api/v1/listings', key, listingBody());
    t.equal(created.status, 201);
    t.equal(
      await deliveries.nextDueInMs(),
      0,
      'an attempt due now (or overdue) is 0, never negative',
    );
    await queryRows(
      app.db,
      sql`update webhook_deliveries set next_attempt_at = now() + interval '1 hour'`,
    );
    const later = await deliveries.nextDueInMs();
    t.ok(later !== null && later > 3_590_000 && later <= 3_600_000, `due in an hour (${later} ms)`);
    await queryRows(app.db, sql`update webhook_deliveries set status = 'failed'`);
    t.equal(await deliveries.nextDueInMs(), null, 'none pending again: nothing due');
  },
);

t.test('an idle worker makes one pass a poll interval', async (t) => {
  const passes: number[] = [];
  class Counted extends DeliveriesRepository {
    override claim(...args: Parameters<DeliveriesRepository['claim']>) {
      passes.push(performance.now());
      return super.claim(...args);
    }
  }
  const pollIntervalMs = 200;
  const worker = new DeliveryWorker(new Counted(app.db), {
    timeoutMs: 5000,
    retryScheduleS: [1],
    allowPrivateNetworks: true,
    pollIntervalMs,
  });
  worker.start();
  t.teardown(() => worker.stop());
  await waitUntil('four passes', () => passes.length >= 4 || undefined, { timeoutMs: 10_000 });
  const gaps = passes.slice(1, 4).map((at, i) => at - passes[i]!);
  // A timer fires no earlier than asked; a loaded machine can only make the gaps longer.
  t.ok(
    gaps.every((gap) => gap >= pollIntervalMs - 5),
    `passes a poll interval apart: ${gaps.map((gap) => gap.toFixed(0)).join(', ')} ms`,
  );
});
