/**
 * Issue #60: DATABASE_URL's sessions are the primary's only. In a switchover the old primary
 * restarts as a standby while the load balancer in front still routes to it for a second or two
 * (HAProxy until its checks mark it down; Patroni's REST API may answer from its cached role):
 * a session opened there then must not serve. On a standby a read is stale (a long poll's
 * horizon, read there, cannot see the primary's open writes, so its cursor could pass an event
 * that commits after: events missed by `GET /api/v1/events?wait=`), and a write fails as a
 * read-only transaction. So the pool opens its sessions with target_session_attrs=primary
 * (src/db/postgres.ts): a server in recovery is refused as an unreachable one is, the request is
 * answered 503 with Retry-After, and the pool comes back once the route leads to a primary again.
 *
 * The load balancer is a TCP proxy in this process (test/helpers/load-balancer.ts) in front of
 * a private primary and its streaming replica (test/helpers/private-servers.ts).
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { loadBalancer } from '../helpers/load-balancer.ts';
import { withPrivateReplica } from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';

const WAIT_MS = 1000;

await withPrivateReplica(
  t,
  'the pool refuses a standby behind DATABASE_URL',
  async (primary, standby) => {
    await t.test('a load balancer routing DATABASE_URL to a standby', async (t) => {
      const lb = await loadBalancer(t, new URL(primary.url));
      const app = await buildTestApp(t, {
        DATABASE_URL: lb.url,
        DATABASE_POOL_WAIT_MS: String(WAIT_MS),
        RATE_LIMIT_MAX: '1000000',
        WEBHOOK_WORKER: 'false',
        SAVED_SEARCH_MATCHER: 'false',
      });
      const developer = await createDeveloper(app);
      const key = await createKey(app, developer, 'sandbox');
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      // Each title once: a retry of a write whose answer was lost finds the listing it made.
      const create = (title: string) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/listings',
          headers: { ...headers, 'idempotency-key': `primary-only-${title}` },
          payload: { title, price_cents: 1000 },
        });
      t.equal((await create('Before')).statusCode, 201, 'a write through the primary');

      lb.route(new URL(standby.url));
      const routed = lb.accepted.length;
      // Asked again and again until the pool has opened at least 5 sessions on the standby: a pool
      // that kept one would serve the next round (200 on a stale read, or a read-only error).
      const rounds: { what: string; status: number; retryAfter: unknown; code?: string }[][] = [];
      while (lb.accepted.length - routed < 5) {
        const [write, events, health] = await Promise.all([
          create('On a standby'),
          app.inject({ url: '/api/v1/events?limit=5', headers }),
          app.inject({ url: '/api/v1/health?db=1' }),
        ]);
        rounds.push(
          [
            ['a write', write!],
            ['a keyed read of events', events!],
            ['the database health check', health!],
          ].map(([what, answer]) => ({
            what: what as string,
            status: (answer as typeof write).statusCode,
            retryAfter: (answer as typeof write).headers['retry-after'],
            code: (answer as typeof write).json().error?.code,
          })),
        );
      }
      const served = rounds.flat().filter((a) => a.status !== 503 || !a.retryAfter);
      t.same(served, [], 'every answer through the standby was 503 with Retry-After');
      t.ok(
        rounds
          .flat()
          .every((a) => a.what === 'the database health check' || a.code === 'service_unavailable'),
        'in the error envelope as service_unavailable',
      );
      t.ok(rounds.length >= 1, `${rounds.length} rounds while the pool tried the standby`);

      lb.route(new URL(primary.url));
      await waitUntil('writes through the primary again', async () => {
        const answer = await create('After');
        return answer.statusCode === 201 || answer.statusCode === 200;
      });
      const titles = (
        await app.inject({ url: '/api/v1/listings?seller=me&status=draft&limit=10', headers })
      )
        .json()
        .data.map((listing: { title: string }) => listing.title)
        .sort();
      t.same(titles, ['After', 'Before'], 'nothing was written while the route led to the standby');
    });
  },
);
