/**
 * Issue #60: a request answers within DATABASE_POOL_WAIT_MS (+0.5 s) through the loss of the
 * primary, anonymous reads included. Such a read goes to the replica while it is in use; as the
 * primary dies (a failover) the replica's address may stop answering too (HAProxy's replica
 * port while the nodes change roles), and the read, having waited its time there, used to be run
 * again on the primary and to wait as long again (2,784 ms with a 2,000 ms wait in
 * `npm run bench:failover`). Now a replica read that lost its connection while the replica's lag
 * poll finds the primary unreachable answers 503 at once (src/db/replica.ts, read()).
 *
 * Both servers sit behind load balancers in this process (test/helpers/load-balancer.ts): the
 * primary's closes every connection (HAProxy with no primary), the replica's holds them
 * unanswered (HAProxy still routing to a node that is going away).
 */
import t from 'tap';
import { loadBalancer } from '../helpers/load-balancer.ts';
import { withPrivateReplica } from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';
import { buildLoggedApp } from '../hardening/support.ts';

const WAIT_MS = 1000;

await withPrivateReplica(
  t,
  'anonymous reads through the loss of both addresses',
  async (primary, standby) => {
    await t.test('the primary closes, the replica hangs', async (t) => {
      const primaryLb = await loadBalancer(t, new URL(primary.url));
      const replicaLb = await loadBalancer(t, new URL(standby.url));
      const { app } = await buildLoggedApp(t, {
        DATABASE_URL: primaryLb.url,
        DATABASE_REPLICA_URL: replicaLb.url,
        DATABASE_POOL_WAIT_MS: String(WAIT_MS),
        DATABASE_REPLICA_MAX_LAG_MS: '10000',
        RATE_LIMIT_MAX: '1000000',
        WEBHOOK_WORKER: 'false',
        SAVED_SEARCH_MATCHER: 'false',
      });
      const replica = app.replica!;
      await waitUntil('anonymous reads served by the replica', async () => {
        const before = replica.stats().reads;
        const answer = await app.inject({ url: '/api/v1/listings?limit=5' });
        return answer.statusCode === 200 && replica.stats().reads > before;
      });

      primaryLb.set('close');
      replicaLb.set('hang');
      const answers = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const started = performance.now();
          const answer = await app.inject({ url: '/api/v1/listings?limit=5' });
          return {
            status: answer.statusCode,
            ms: Math.round(performance.now() - started),
            retryAfter: answer.headers['retry-after'] ?? null,
          };
        }),
      );
      t.comment(JSON.stringify(answers));
      t.ok(
        answers.every((a) => a.status === 503 && a.retryAfter !== null),
        'every read answered 503 with Retry-After',
      );
      t.ok(
        answers.every((a) => a.ms <= WAIT_MS + 500),
        `every read answered within DATABASE_POOL_WAIT_MS + 0.5 s (${answers.map((a) => a.ms).join(', ')} ms)`,
      );

      primaryLb.set('pass');
      replicaLb.set('pass');
      await waitUntil('anonymous reads answered again', async () => {
        const answer = await app.inject({ url: '/api/v1/listings?limit=5' });
        return answer.statusCode === 200;
      });
    });
  },
);
