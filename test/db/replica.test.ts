/**
 * The read replica (DATABASE_REPLICA_URL, docs/operations.md "Read replica") on a real streaming
 * replica: a private primary cluster and a hot standby made from it with pg_basebackup -R (never
 * the shared servers), both stopped and removed in teardown. The app runs in this process on the
 * primary with the standby as its replica and a lag bound of BOUND_MS.
 *
 * - Anonymous reads (the feed, a listing by id, a search) are the replica's: with its replay
 *   paused they answer what it had, while a keyed read (and an anonymous sync page) answers the
 *   write at once.
 * - Paused longer than the bound: anonymous reads answer from the primary, the metrics show the
 *   state and the fallbacks, one log line says so; resumed, reads are the replica's again.
 * - Stopped (pg_ctl stop -m fast): every anonymous read still answers 200 with the latest data;
 *   started again, reads are the replica's again.
 * - Not one 5xx throughout.
 */
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { METRICS_TOKEN, requirePrometheusParser, sampleValue, scrape } from '../helpers/metrics.ts';
import { withPrivateReplica, type PrivatePostgres } from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';
import { PHOTO } from '../listings/support.ts';
import { buildLoggedApp } from '../hardening/support.ts';

requirePrometheusParser(t);

/** The test's lag bound: short, and still well above the time a few reads take. */
const BOUND_MS = 2000;

await withPrivateReplica(t, 'anonymous reads on a streaming replica', replicaReads);

async function replicaReads(primary: PrivatePostgres, standby: PrivatePostgres): Promise<void> {
  await t.test('the app on a primary and its streaming replica', (t) =>
    onReplica(t, primary, standby),
  );
}

async function onReplica(t: Test, primary: PrivatePostgres, standby: PrivatePostgres) {
  const { app, logs } = await buildLoggedApp(t, {
    DATABASE_URL: primary.url,
    DATABASE_REPLICA_URL: standby.url,
    DATABASE_REPLICA_MAX_LAG_MS: String(BOUND_MS),
    METRICS_TOKEN,
    RATE_LIMIT_MAX: '1000000',
    // A sync page lists a change at once (it reads the primary, whoever asks).
    SYNC_SETTLE_MS: '0',
  });
  let standbySql = postgres(standby.url, { max: 1, onnotice: () => {} });
  t.teardown(() => standbySql.end({ timeout: 1 }));
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'live');

  /** Every answer's status, to prove that none was a 5xx. */
  const statuses: { what: string; status: number }[] = [];
  const get = async (url: string, credential?: string) => {
    const answer = await app.inject({ url, headers: credential ? bearer(credential) : {} });
    statuses.push({ what: `GET ${url}${credential ? ' (keyed)' : ''}`, status: answer.statusCode });
    return { status: answer.statusCode, body: answer.json() };
  };
  const send = async (method: 'POST' | 'PATCH', url: string, payload: object) => {
    const answer = await app.inject({ method, url, headers: bearer(key), payload });
    statuses.push({ what: `${method} ${url}`, status: answer.statusCode });
    t.ok(answer.statusCode < 300, `${method} ${url}: ${answer.statusCode}`);
    return answer.json().data;
  };
  const titleOf = async (id: string, credential?: string) => {
    const answer = await get(`/api/v1/listings/${id}`, credential);
    return answer.status === 200 ? (answer.body.data.title as string) : `(${answer.status})`;
  };
  const feedIds = async (credential?: string) =>
    ((await get('/api/v1/listings?limit=100', credential)).body.data as { id: string }[]).map(
      (listing) => listing.id,
    );
  const searchIds = async (word: string, credential?: string) =>
    (
      (await get(`/api/v1/listings?q=${word}&limit=100`, credential)).body.data as { id: string }[]
    ).map((listing) => listing.id);
  const syncTitles = async () =>
    (
      (await get('/api/v1/listings?sort=updated_at&limit=100')).body.data as {
        title: string;
      }[]
    ).map((listing) => listing.title);
  const metrics = () =>
    scrape(async (headers) => {
      const answer = await app.inject({ url: '/metrics', headers });
      return { status: answer.statusCode, body: answer.body };
    });
  const replica = app.replica!;
  const state = () => replica.stats().state;
  const events = (event: string) => logs().filter((line) => line.event === event).length;
  const pause = async () => {
    await standbySql`select pg_wal_replay_pause()`;
    await waitUntil(
      'replay paused',
      async () =>
        (await standbySql`select pg_get_wal_replay_pause_state() as s`)[0]!.s === 'paused',
    );
  };
  const resume = () => standbySql`select pg_wal_replay_resume()`;
  const create = (title: string) =>
    send('POST', '/api/v1/listings', {
      title,
      price_cents: 1500,
      status: 'active',
      image_urls: [PHOTO],
    }) as Promise<{ id: string }>;
  const retitle = (id: string, title: string) => send('PATCH', `/api/v1/listings/${id}`, { title });

  /**
   * The replica serves anonymous reads: with replay paused, a write is invisible to them (each
   * read counted by the replica) and visible to a keyed read.
   */
  const provesReplicaServes = async (t: Test, id: string, before: string, after: string) => {
    await pause();
    const readsBefore = replica.stats().reads;
    await retitle(id, after);
    const started = Date.now();
    t.equal(await titleOf(id), before, 'anonymous by id: what the replica has');
    t.equal(await titleOf(id, key), after, 'keyed by id: the write, at once');
    t.ok(replica.stats().reads > readsBefore, 'the replica served the anonymous read');
    t.ok(Date.now() - started < BOUND_MS, 'all within the bound');
    await resume();
    await waitUntil('the replica back in use', () => state() === 'ok', { timeoutMs: 15_000 });
    await waitUntil('the replica to show the write', async () => (await titleOf(id)) === after);
  };

  await waitUntil('the replica in use', () => state() === 'ok', { timeoutMs: 15_000 });
  t.equal(events('db_replica_up'), 1, 'logged once: the replica is in use');
  const first = await create('Alpha lamp');
  await waitUntil('the listing on the replica', async () => (await titleOf(first.id)) !== '(404)');

  await t.test(
    'anonymous reads are served by the replica, keyed reads by the primary',
    async (t) => {
      const pausing = Date.now();
      await pause();
      const started = Date.now();
      await retitle(first.id, 'Bravo lamp');
      const second = await create('Bravo chair');
      t.equal(
        await titleOf(first.id),
        'Alpha lamp',
        'anonymous by id: the replica, before the edit',
      );
      t.notOk((await feedIds()).includes(second.id), 'anonymous feed: without the new listing');
      t.notOk((await searchIds('bravo')).includes(first.id), 'anonymous search: the old title');
      t.ok(
        (await searchIds('alpha')).includes(first.id),
        'anonymous search: the old title matches',
      );
      t.ok(Date.now() - started < BOUND_MS, `all within the bound (${Date.now() - started} ms)`);
      t.equal(await titleOf(first.id, key), 'Bravo lamp', 'keyed by id: the edit');
      t.ok((await feedIds(key)).includes(second.id), 'keyed feed: the new listing');
      t.ok((await searchIds('bravo', key)).includes(first.id), 'keyed search: the new title');
      t.ok((await syncTitles()).includes('Bravo chair'), 'anonymous sync page: the primary');
      t.equal(state(), 'ok', 'still in use');

      // Paused beyond the bound.
      await waitUntil('the replica skipped as lagging', () => state() === 'lagging', {
        timeoutMs: BOUND_MS + 5000,
      });
      // Counted from when a poll (every second) first saw a position the replica has not replayed:
      // WAL written just before the pause may have been seen up to one poll before it.
      t.ok(Date.now() - pausing >= BOUND_MS - 1000, 'not before the bound');
      t.equal(await titleOf(first.id), 'Bravo lamp', 'anonymous by id: the primary');
      t.ok((await feedIds()).includes(second.id), 'anonymous feed: the primary');
      t.ok((await searchIds('bravo')).includes(first.id), 'anonymous search: the primary');
      const lagging = await metrics();
      t.equal(sampleValue(lagging, 'db_replica_state', { state: 'lagging' }), 1, 'state gauge');
      t.equal(sampleValue(lagging, 'db_replica_state', { state: 'ok' }), 0);
      t.ok(sampleValue(lagging, 'db_replica_lag_seconds') > BOUND_MS / 1000, 'lag gauge');
      t.ok(
        sampleValue(lagging, 'db_replica_fallbacks_total', { reason: 'lagging' }) >= 3,
        'the three reads counted as fallbacks',
      );
      // More polls, more reads: still one log line.
      const lagPolls = replica.polls;
      await waitUntil('two more polls', () => replica.polls >= lagPolls + 2, { timeoutMs: 10_000 });
      await titleOf(first.id);
      t.equal(events('db_replica_lagging'), 1, 'one log line for the whole episode');

      await resume();
      await waitUntil('the replica back in use', () => state() === 'ok', { timeoutMs: 15_000 });
      t.equal(events('db_replica_up'), 2, 'its return logged once');
      t.ok(
        sampleValue(await metrics(), 'db_replica_lag_seconds') < BOUND_MS / 1000,
        'lag gauge within the bound',
      );
      await waitUntil('the replica to show the edit', async () => {
        return (await titleOf(first.id)) === 'Bravo lamp';
      });
      await provesReplicaServes(t, first.id, 'Bravo lamp', 'Charlie lamp');
    },
  );

  await t.test(
    'a replica stopped: reads fall back within the request; back once started',
    async (t) => {
      const fallbacksBefore = replica.stats().fallbacks;
      let reading = true;
      const answers: { status: number; title: string }[] = [];
      const reader = (async () => {
        while (reading) {
          const answer = await get(`/api/v1/listings/${first.id}`);
          answers.push({ status: answer.status, title: answer.body.data?.title });
          await get('/api/v1/listings?limit=100');
          await get('/api/v1/listings?q=charlie');
        }
      })();
      await waitUntil('reads under way', () => answers.length >= 3);
      await standbySql.end({ timeout: 1 });
      await standby.stop('fast');
      await waitUntil('the replica skipped as down', () => state() === 'down', {
        timeoutMs: 10_000,
      });
      // Polls keep failing: still one log line.
      const downPolls = replica.polls;
      await waitUntil('three more polls', () => replica.polls >= downPolls + 3, {
        timeoutMs: 15_000,
      });
      reading = false;
      await reader;
      t.ok(answers.length > 10, `${answers.length} anonymous reads by id meanwhile`);
      t.same(
        answers.filter((a) => a.status !== 200 || a.title !== 'Charlie lamp'),
        [],
        'every one 200 with the latest title',
      );
      const fallbacks = replica.stats().fallbacks;
      // The reads in flight when it stopped, and those sent before a poll noticed, failed on the
      // replica and were answered by the primary in the same request (all 200 above).
      t.ok(fallbacks.error > fallbacksBefore.error, 'failed replica reads retried on the primary');
      t.ok(fallbacks.down > fallbacksBefore.down, 'reads went to the primary while it was down');
      t.comment(`fallbacks: ${JSON.stringify(fallbacks)}`);
      t.equal(events('db_replica_down'), 1, 'one log line for the outage');
      const down = await metrics();
      t.equal(sampleValue(down, 'db_replica_state', { state: 'down' }), 1, 'state gauge');
      t.ok(sampleValue(down, 'db_replica_fallbacks_total', { reason: 'down' }) >= 1);
      t.equal(await titleOf(first.id), 'Charlie lamp', 'by id, while it is down');
      t.ok((await searchIds('charlie')).includes(first.id), 'search, while it is down');

      await standby.start();
      standbySql = postgres(standby.url, { max: 1, onnotice: () => {} });
      await waitUntil('the replica back in use', () => state() === 'ok', { timeoutMs: 20_000 });
      t.equal(events('db_replica_up'), 3, 'its return logged once');
      await provesReplicaServes(t, first.id, 'Charlie lamp', 'Delta lamp');
    },
  );

  t.same(
    statuses.filter((s) => s.status >= 500),
    [],
    `no 5xx in ${statuses.length} answers`,
  );
}
