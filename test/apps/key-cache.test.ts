/**
 * API keys held between requests (src/apps/key-cache.ts) without delaying a revocation: the
 * cache itself (what it serves, when it reads again), the triggers that announce every change
 * that can stop a key (drizzle/0008), and a server that drops a key as soon as another process
 * (the CLI, another instance: here a second set of services on the same database) revokes it,
 * rolls it or deletes its app, on PostgreSQL and on the embedded database alike.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { KeyCache, type HeldKey } from '../../src/apps/key-cache.ts';
import { createServices } from '../../src/services.ts';
import {
  bearer,
  createDeveloper,
  listenToCredentialChanges,
  revokeUnannounced,
} from '../helpers/accounts.ts';
import { waitUntil } from '../helpers/wait.ts';
import { listingsApp } from '../listings/support.ts';

/** A cache on a clock the test moves, and a reader that counts its reads. */
function fixture(found: HeldKey<string> | null = { value: 'key', expiresAtMs: null }) {
  let now = 1_000_000;
  const cache = new KeyCache<string>(10_000, () => now);
  const reads = { count: 0 };
  const read = async () => {
    reads.count += 1;
    return found ?? undefined;
  };
  // LISTEN took effect and the process's heartbeats are heard, as on a healthy channel: every
  // move of the clock brings a fresh one.
  const hear = () => {
    cache.heard();
    cache.beat(now);
  };
  const advance = (ms: number) => {
    now += ms;
    cache.beat(now);
    return now;
  };
  return { cache, reads, read, hear, advance, now: () => now };
}

t.test('the cache', async (t) => {
  t.test('until the changes are heard, every lookup reads', async (t) => {
    const { cache, reads, read } = fixture();
    t.equal(cache.active, false);
    t.equal(await cache.lookup('d', read), 'key');
    t.equal(await cache.lookup('d', read), 'key');
    t.equal(reads.count, 2);
  });

  t.test('heard: the second lookup is served, until the TTL', async (t) => {
    const { cache, reads, read, hear, advance } = fixture();
    hear();
    await cache.lookup('d', read);
    advance(9_999);
    t.equal(await cache.lookup('d', read), 'key');
    t.equal(reads.count, 1, 'held');
    advance(1);
    await cache.lookup('d', read);
    t.equal(reads.count, 2, 'read again once the TTL is over');
  });

  t.test('a rolled key is read again once it expires', async (t) => {
    const { cache, reads, read, hear, advance, now } = fixture();
    const rolled = { value: 'rolled', expiresAtMs: now() + 500 };
    hear();
    await cache.lookup('d', async () => {
      reads.count += 1;
      return rolled;
    });
    advance(499);
    t.equal(await cache.lookup('d', read), 'rolled', 'held before its expiry');
    advance(1);
    t.equal(await cache.lookup('d', read), 'key', 'read again at its expiry');
    t.equal(reads.count, 2);
  });

  t.test('what is not found is never held', async (t) => {
    const { cache, reads, read, hear } = fixture(null);
    hear();
    t.equal(await cache.lookup('d', read), undefined);
    t.equal(await cache.lookup('d', read), undefined);
    t.equal(reads.count, 2);
  });

  t.test('invalidate, deaf and a reconnect drop what is held', async (t) => {
    const { cache, reads, read, hear } = fixture();
    hear();
    await cache.lookup('d', read);
    cache.invalidate();
    await cache.lookup('d', read);
    t.equal(reads.count, 2, 'after invalidate');
    hear();
    await cache.lookup('d', read);
    t.equal(reads.count, 3, 'after a reconnect (heard again)');
    cache.deaf();
    t.equal(cache.active, false);
    await cache.lookup('d', read);
    await cache.lookup('d', read);
    t.equal(reads.count, 5, 'deaf: every lookup reads');
  });

  t.test('served only while a heartbeat sent within a second was heard', async (t) => {
    // Issue #60 item 2: a LISTEN connection down, reconnecting or dead unnoticed hears no
    // heartbeat; the cache stops serving a second after the last one was sent.
    const { cache, reads, read, now } = fixture();
    let clock = now();
    const at = new KeyCache<string>(10_000, () => clock);
    at.heard();
    t.equal(at.active, false, 'LISTEN took effect, no heartbeat heard yet: not served');
    at.beat(clock);
    t.equal(at.active, true, 'its heartbeat heard: served');
    await at.lookup('d', read);
    await at.lookup('d', read);
    t.equal(reads.count, 1, 'held');
    clock += 1000;
    t.equal(at.active, true, 'a second after the heartbeat was sent: still');
    clock += 1;
    t.equal(at.active, false, 'no heartbeat sent within the last second heard: not served');
    await at.lookup('d', read);
    t.equal(reads.count, 2, 'read through');
    at.beat(clock);
    // Heard in commit order: every change committed before the heartbeat was heard too.
    t.equal(await at.lookup('d', read), 'key');
    t.equal(reads.count, 2, 'a heartbeat heard again: served from what it holds');
    at.heard();
    t.equal(at.active, false, 'a reconnect: not served until a heartbeat is heard again');
    await at.lookup('d', read);
    t.equal(reads.count, 3, 'and what it held was dropped');
    at.beat(clock);
    t.equal(at.active, true, 'its heartbeat heard');
    t.equal(cache.active, false, 'an unheard cache never serves');
  });

  t.test('a read that overlapped an invalidation is not held', async (t) => {
    const { cache, hear } = fixture();
    hear();
    let reads = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const slow = async () => {
      reads += 1;
      await released;
      return { value: 'before the revoke', expiresAtMs: null };
    };
    const pending = cache.lookup('d', slow);
    cache.invalidate(); // a revoke committed while the read was in flight
    release();
    t.equal(await pending, 'before the revoke', 'the overlapping request is answered');
    await cache.lookup('d', slow);
    t.equal(reads, 2, 'but its result was not kept');
  });

  t.test('holds at most 10,000 keys, dropping the oldest', async (t) => {
    const { cache, hear } = fixture();
    hear();
    const reads = new Map<string, number>();
    const readOf = (digest: string) => async () => {
      reads.set(digest, (reads.get(digest) ?? 0) + 1);
      return { value: digest, expiresAtMs: null };
    };
    for (let i = 0; i <= 10_000; i += 1) await cache.lookup(`d${i}`, readOf(`d${i}`));
    await cache.lookup('d0', readOf('d0'));
    await cache.lookup('d10000', readOf('d10000'));
    t.equal(reads.get('d0'), 2, 'the oldest was dropped');
    t.equal(reads.get('d10000'), 1, 'the newest is held');
  });
});

t.test('over the database', async (t) => {
  const app = await listingsApp(t);
  // Another process on the same database (the admin CLI, another instance): its own services.
  const elsewhere = createServices(app.db);
  const heard = await listenToCredentialChanges(app);
  const me = async (key: string) =>
    (await app.inject({ method: 'GET', url: '/api/v1/me', headers: bearer(key) })).statusCode;
  const dev = await createDeveloper(app);
  const newKey = () => app.services.keys.create({ appId: dev.appId, env: 'sandbox' });
  await waitUntil('the server to hear key changes', () => app.services.keys.held.active);

  t.test('a key in use is held: a change that bypasses the triggers is not seen', async (t) => {
    const { id, key } = await newKey();
    // Held while heartbeats are heard (a loaded machine can miss the second they are given).
    const active = () => app.services.keys.held.active;
    await waitUntil('the key held', async () => active() && (await me(key)) === 200 && active());
    await revokeUnannounced(app, 'api_keys', id);
    await waitUntil('heartbeats heard', active);
    t.equal(await me(key), 200, 'answered from what the server holds');
    app.services.keys.held.invalidate();
    t.equal(await me(key), 401, 'read again: revoked');
  });

  t.test('what notifies: revoke, roll, scopes, app deletion; not last use or a name', async (t) => {
    const { id } = await newKey();
    const before = heard.count();
    await app.db.execute(
      sql`update api_keys set last_used_at = now(), name = 'renamed' where id = ${id}`,
    );
    await heard.settle();
    t.equal(heard.count(), before, 'last_used_at and name: nothing');
    await app.db.execute(sql`update api_keys set scopes = array['read'] where id = ${id}`);
    await waitUntil('scopes notify', async () => heard.count() === before + 1, {
      timeoutMs: 2_000,
      everyMs: 2,
    });
    t.pass('scopes notify');
    await elsewhere.keys.revoke(id);
    await waitUntil('a revoke notifies', async () => heard.count() === before + 2, {
      timeoutMs: 2_000,
      everyMs: 2,
    });
    t.pass('a revoke notifies');
  });

  t.test('revoked by another process: refused as soon as the change is heard', async (t) => {
    const { id, key } = await newKey();
    t.equal(await me(key), 200);
    await elsewhere.keys.revoke(id);
    await waitUntil('refused after a revoke elsewhere', async () => (await me(key)) === 401, {
      timeoutMs: 2_000,
      everyMs: 2,
    });
    t.pass('refused after a revoke elsewhere');
  });

  t.test('rolled "now" by another process: the old key stops, its replacement works', async (t) => {
    const { id, key } = await newKey();
    t.equal(await me(key), 200);
    const rolled = await elsewhere.keys.roll(id, 'now');
    await waitUntil('old key refused after a roll elsewhere', async () => (await me(key)) === 401, {
      timeoutMs: 2_000,
      everyMs: 2,
    });
    t.pass('old key refused after a roll elsewhere');
    t.equal(await me(rolled.key), 200);
  });

  t.test('revoked through this server: refused on the very next request', async (t) => {
    const { id, key } = await newKey();
    t.equal(await me(key), 200);
    await app.services.keys.revoke(id);
    t.equal(await me(key), 401);
  });

  t.test('its app deleted, here or elsewhere: refused', async (t) => {
    const here = await createDeveloper(app);
    const there = await createDeveloper(app);
    const hereKey = (await app.services.keys.create({ appId: here.appId, env: 'sandbox' })).key;
    const thereKey = (await app.services.keys.create({ appId: there.appId, env: 'sandbox' })).key;
    t.equal(await me(hereKey), 200);
    t.equal(await me(thereKey), 200);
    await app.services.apps.delete(here.appId, `${here.username}'s app`);
    t.equal(await me(hereKey), 401, 'deleted through this server: the next request');
    await elsewhere.apps.delete(there.appId, `${there.username}'s app`);
    await waitUntil('deleted elsewhere', async () => (await me(thereKey)) === 401, {
      timeoutMs: 2_000,
      everyMs: 2,
    });
    t.pass('deleted elsewhere');
  });
});
