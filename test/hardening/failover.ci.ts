/**
 * The service through the loss of its database primary (issue #60, item 4; docs/operations.md
 * "High availability"): the topology of scripts/ha-cluster.ts (three PostgreSQL nodes under
 * Patroni in synchronous mode, one etcd member, HAProxy routing a primary and a replica port by
 * Patroni's REST checks), one API process built and started as `npm start` runs it with
 * DATABASE_URL at HAProxy's primary port and DATABASE_REPLICA_URL at its replica port, and the
 * load of scripts/ha-failover.ts (writers with an Idempotency-Key each, retried on 5xx; readers;
 * a long poll; a key revoked right after each fault) through a kill -9 of the primary's
 * postmaster and then a `patronictl switchover`.
 *
 * It fails on any acknowledged write missing on the new primary, any Idempotency-Key with two
 * listings, any answer but 2xx, a documented 4xx or 503 (a 503 always with Retry-After), any
 * request waiting past DATABASE_POOL_WAIT_MS + 0.5 s, any event of an acknowledged write the long
 * poll missed or repeated, any revoked key accepted after its revocation committed, and any
 * request failed once writes were acknowledged again after a fault; and on
 * writes out for longer than Patroni's ttl + 3 s after the kill, or 3 s in the switchover (from
 * the first failed write, as a client sees it).
 *
 * It needs Patroni, etcd, HAProxy and PostgreSQL's server binaries, so it is a .ci.ts file: .ci/run
 * installs them and runs it on its own leg; `npx tap test/hardening/failover.ci.ts` runs it by
 * hand (about a minute and a half). `npm run bench:failover` runs the same load for the figures.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { haClusterMissing, PATRONI_TIMINGS, startHaCluster } from '../../scripts/ha-cluster.ts';
import { runFailover } from '../../scripts/ha-failover.ts';
import { startServerProcess } from '../helpers/private-servers.ts';
import { requirePart } from '../helpers/system-parts.ts';
import { waitUntil } from '../helpers/wait.ts';

requirePart(t, haClusterMissing());

const POOL_WAIT_MS = 2000;

t.test('a kill -9 of the primary and a switchover under load', async (t) => {
  const log = (line: string) => t.comment(line);
  // Ports of this file's own (the bench's defaults are 5445, 8005 and 23792): HAProxy's primary
  // port and the replica port 4 above it, the nodes between; the REST APIs and etcd likewise.
  const cluster = await startHaCluster({
    dir: mkdtempSync(join(tmpdir(), 'failover-ci-')),
    pgPort: 5460,
    restPort: 8030,
    etcdPort: 23810,
    log,
  });
  t.teardown(() => cluster.stop());

  const server = await startServerProcess(t, {
    NODE_ENV: 'production',
    SESSION_SECRET: 'a failover test session secret of at least 32 characters',
    DATABASE_URL: cluster.primaryUrl,
    DATABASE_REPLICA_URL: cluster.replicaUrl,
    DATABASE_POOL_WAIT_MS: String(POOL_WAIT_MS),
    // Every request comes from one address; the limits are not the subject here.
    RATE_LIMIT_MAX: '1000000',
    REDIS_URL: '',
  });
  await waitUntil('the API to answer its database health check', async () => {
    const res = await fetch(`${server.base}/api/v1/health?db=1`).catch(() => null);
    return res?.status === 200;
  });

  const report = await runFailover({
    cluster,
    origin: server.base,
    faults: ['kill', 'switchover'],
    writers: 8,
    steadyMs: 3000,
    log,
  });
  log(JSON.stringify({ ...report, slowest: report.slowest }));

  t.ok(report.acknowledged > 100, `writes were acknowledged (${report.acknowledged})`);
  t.equal(report.lost, 0, 'no acknowledged create is missing on the new primary');
  t.equal(report.duplicates, 0, 'no Idempotency-Key has two listings');
  t.equal(report.unexpected, 0, 'no answer but 2xx, 4xx and 503, and every request answered');
  t.equal(report.withoutRetryAfter, 0, 'every 503 carries Retry-After');
  t.ok(
    report.longestWaitMs <= POOL_WAIT_MS + 500,
    `no request waited past DATABASE_POOL_WAIT_MS + 0.5 s (longest ${report.longestWaitMs} ms: ` +
      `${JSON.stringify(report.slowest)})`,
  );
  t.equal(report.eventsMissing, 0, "the long poll answered every acknowledged write's event");
  t.equal(report.eventsRepeated, 0, 'the long poll answered no event twice');
  t.equal(report.revokedAccepted, 0, 'no revoked key was accepted after its revocation');
  for (const fault of report.faults)
    t.equal(fault.failedAfterRecovery, 0, `${fault.fault}: no request failed after the recovery`);

  const [kill, switchover] = report.faults;
  t.equal(kill?.fault, 'kill');
  t.not(kill?.to, kill?.from, 'the kill -9 promoted another node');
  t.ok(
    kill!.writeOutageMs <= (PATRONI_TIMINGS.ttl + 3) * 1000,
    `writes came back within ttl + 3 s of the kill (${kill!.writeOutageMs} ms)`,
  );
  t.equal(switchover?.fault, 'switchover');
  t.not(switchover?.to, switchover?.from, 'the switchover moved the primary');
  t.ok(
    switchover!.clientOutageMs <= 3000,
    `writes were out at most 3 s in the switchover (${switchover!.clientOutageMs} ms)`,
  );

  // What an operator reads (docs/operations.md "High availability"): the outage named as the
  // primary's (the replica's monitor cannot measure its lag without it), and the webhook worker
  // down and up again.
  const logs = server.logs();
  t.ok(
    logs.some((entry) => entry.event === 'db_replica_down' && entry.unreachable === 'primary'),
    'the log names the primary as the server that is unreachable',
  );
  const events = logs.map((entry) => entry.event);
  t.ok(events.includes('webhook_worker_down') && events.includes('webhook_worker_up'));
});
