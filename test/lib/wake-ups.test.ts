/**
 * The one wake-up of the background loops (src/lib/wake-ups.ts): a write inside its
 * transaction wakes a lane once its request has been answered, once per request however many
 * writes it made; a committed one wakes it now; outside a request, after the current turn. And
 * in the server: a listing write wakes the matcher and the delivery worker after its commit,
 * once each.
 */
import { sql } from 'drizzle-orm';
import Fastify from 'fastify';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { WakeUps } from '../../src/lib/wake-ups.ts';
import tracing from '../../src/plugins/tracing.ts';
import { publish, searcher } from '../saved-searches/support.ts';
import { webhooksApp } from '../webhooks/support.ts';

t.test('in a request: after the answer, once per lane', async (t) => {
  const wakeUps = new WakeUps();
  const woken: string[] = [];
  wakeUps.on('matching', () => woken.push('matching'));
  wakeUps.on('deliveries', () => woken.push('deliveries'));
  const app = Fastify();
  await app.register(tracing);
  let beforeAnswer: string[] | null = null;
  app.post('/write', async () => {
    wakeUps.afterCommit('matching');
    wakeUps.afterCommit('matching');
    wakeUps.afterCommit('deliveries');
    await new Promise((resolve) => setImmediate(resolve));
    beforeAnswer = [...woken];
    return { ok: true };
  });
  app.post('/committed', async () => {
    wakeUps.now('deliveries');
    beforeAnswer = [...woken];
    return { ok: true };
  });
  t.teardown(() => app.close());

  const res = await app.inject({ method: 'POST', url: '/write' });
  t.equal(res.statusCode, 200);
  t.strictSame(beforeAnswer, [], 'nothing woken while the request is still being served');
  t.strictSame(woken, ['matching', 'deliveries'], 'each lane woken once, after the answer');

  woken.length = 0;
  await app.inject({ method: 'POST', url: '/committed' });
  t.strictSame(beforeAnswer, ['deliveries'], 'now() wakes at once');
  t.strictSame(woken, ['deliveries'], 'and only then');

  woken.length = 0;
  await app.inject({ method: 'POST', url: '/write' });
  t.strictSame(woken, ['matching', 'deliveries'], "the next request's wake-ups are its own");
});

t.test('outside a request: after the current turn', async (t) => {
  const wakeUps = new WakeUps();
  let woken = 0;
  wakeUps.on('matching', () => (woken += 1));
  wakeUps.afterCommit('matching');
  t.equal(woken, 0, 'not within the turn that asked');
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(woken, 1, 'then once');
});

t.test('a listing write wakes the matcher and the worker after its commit', async (t) => {
  const app = await webhooksApp(t);
  const seller = await searcher(app);
  const seen: { lane: string; committed: number }[] = [];
  let pending: Promise<void>[] = [];
  for (const lane of ['matching', 'deliveries'] as const)
    app.services.wakeUps.on(lane, () => {
      // What another connection sees when the lane is woken: the write, committed.
      pending.push(
        queryRows<{ n: number }>(
          app.db,
          sql`select count(*)::int as n from listings where seller_id = ${seller.userId}`,
        ).then(([row]) => void seen.push({ lane, committed: row!.n })),
      );
    });
  await publish(app, seller.sandbox, { title: 'Woken once' });
  await Promise.all(pending);
  pending = [];
  t.strictSame(
    seen.sort((a, b) => a.lane.localeCompare(b.lane)),
    [
      { lane: 'deliveries', committed: 1 },
      { lane: 'matching', committed: 1 },
    ],
    'each lane woken once, the listing visible',
  );
});
