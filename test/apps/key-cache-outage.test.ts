/**
 * Issue #60 item 2: no credential served without a live revocation channel. The server LISTENs
 * for credential changes on a connection of its own (DATABASE_DIRECT_URL); here that URL goes
 * through a load balancer (test/helpers/load-balancer.ts) that drops the LISTEN's session and
 * closes every new one, as during a failover, while the pool (DATABASE_URL) still reaches the
 * server. A key revoked by another process meanwhile (its notification lost) is refused at once,
 * and again once the LISTEN is back; keys are held again only then (src/apps/key-cache.ts).
 */
import t from 'tap';
import { createServices } from '../../src/services.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { bearer, createDeveloper } from '../helpers/accounts.ts';
import { loadBalancer } from '../helpers/load-balancer.ts';
import { waitUntil } from '../helpers/wait.ts';
import { listingsApp } from '../listings/support.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
const direct = process.env.DATABASE_DIRECT_URL;

t.test(
  'a key revoked while the LISTEN connection is down is refused at once',
  {
    skip:
      (!onPostgres && 'PostgreSQL only (DATABASE_URL): a LISTEN connection of its own') ||
      (direct !== undefined && direct !== '' && 'the pooler leg sets DATABASE_DIRECT_URL itself'),
  },
  async (t) => {
    const env = await freshDatabaseEnv(t);
    const lb = await loadBalancer(t, new URL(env.DATABASE_URL));
    const app = await listingsApp(t, { ...env, DATABASE_DIRECT_URL: lb.url });
    const elsewhere = createServices(app.db);
    const held = app.services.heldCredentials;
    const me = async (key: string) =>
      (await app.inject({ method: 'GET', url: '/api/v1/me', headers: bearer(key) })).statusCode;
    const dev = await createDeveloper(app);
    const first = await app.services.keys.create({ appId: dev.appId, env: 'sandbox' });
    const second = await app.services.keys.create({ appId: dev.appId, env: 'sandbox' });
    await waitUntil('the server to hear credential changes', () => held.active);
    t.equal(await me(first.key), 200);
    t.equal(await me(second.key), 200, 'both keys held');

    lb.set('close');
    await waitUntil('the caches to stop trusting what they hold', () => !held.active, {
      timeoutMs: 5000,
    });
    await elsewhere.keys.revoke(first.id);
    t.equal(await me(first.key), 401, 'revoked while the LISTEN is down: refused at once');
    t.equal(await me(second.key), 200, 'another key still works, read through');
    t.equal(held.active, false, 'nothing is held meanwhile');

    lb.set('pass');
    await waitUntil('the LISTEN back and heard', () => held.active, { timeoutMs: 10_000 });
    t.equal(await me(first.key), 401, 'refused once the LISTEN is back');
    t.equal(await me(second.key), 200);
  },
);
