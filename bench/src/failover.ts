/**
 * The failover benchmark (issue #60 item 7; docs/performance.md "Failover"): the topology of
 * scripts/ha-cluster.ts (Patroni, etcd, HAProxy: three PostgreSQL nodes, synchronous mode), one
 * API process built and run as `npm start` runs it, DATABASE_URL at HAProxy's primary port and
 * DATABASE_REPLICA_URL at its replica port, and per round one kill -9 of the primary's
 * postmaster and one `patronictl switchover` under the load of scripts/ha-failover.ts (8 writers
 * with Idempotency-Keys, anonymous readers, a long poll, a key revoked after each fault).
 *
 *   npm run bench:failover -- [--rounds 1] [--writers 8] [--steady 3] [--dir /tmp/ha-bench]
 *     [--pg-port 5445] [--rest-port 8005] [--etcd-port 23792] [--api-port 8010]
 *
 * Prints one line per fault, then the run's figures as a Markdown table (its measures are
 * scripts/ha-failover.ts's FailoverReport). Exits 1 when a figure breaks its target: a write
 * lost or duplicated, a response other than 2xx, 4xx and 503, a request waiting past
 * DATABASE_POOL_WAIT_MS + 0.5 s, a revoked key accepted, a request failed after the new primary
 * answered.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startHaCluster } from '../../scripts/ha-cluster.ts';
import { runFailover, type Fault, type FailoverReport } from '../../scripts/ha-failover.ts';
import {
  runMain,
  startCommand,
  startProcess,
  stopProcess,
  waitForFirstResponse,
} from './processes.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const POOL_WAIT_MS = 2000;
const log = (line: string) => process.stderr.write(`[bench:failover] ${line}\n`);

function options(argv: string[]) {
  const values = {
    rounds: 1,
    writers: 8,
    steady: 3,
    'pg-port': 5445,
    'rest-port': 8005,
    'etcd-port': 23792,
    'api-port': 8010,
  };
  let dir = '/tmp/ha-bench';
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i]!.replace(/^--/, '');
    if (key === 'dir') {
      dir = argv[i + 1]!;
      continue;
    }
    const value = Number(argv[i + 1]);
    if (!(key in values) || !Number.isInteger(value) || value < 1)
      throw new Error(
        'usage: npm run bench:failover -- [--rounds N] [--writers N] [--steady S] [--dir DIR] ' +
          `[--pg-port N] [--rest-port N] [--etcd-port N] [--api-port N] (got ${argv[i]} ${argv[i + 1]})`,
      );
    values[key as keyof typeof values] = value;
  }
  return { ...values, dir };
}

const sum = (records: Record<string, number>[]) => {
  const total: Record<string, number> = {};
  for (const r of records) for (const [k, v] of Object.entries(r)) total[k] = (total[k] ?? 0) + v;
  return total;
};
const counts = (r: Record<string, number>) =>
  Object.entries(r)
    .map(([status, n]) => `${status === '0' ? 'no answer' : status}: ${n}`)
    .join(', ');

async function main(): Promise<number> {
  const opts = options(process.argv.slice(2));
  log('building the server (npm run build)');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  const started = Date.now();
  const cluster = await startHaCluster({
    dir: opts.dir,
    pgPort: opts['pg-port'],
    restPort: opts['rest-port'],
    etcdPort: opts['etcd-port'],
    log,
  });
  log(`cluster healthy in ${Date.now() - started} ms`);
  const api = startProcess(
    'API',
    startCommand(root),
    {
      NODE_ENV: 'production',
      SESSION_SECRET: 'a bench session secret of at least 32 characters',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      RATE_LIMIT_MAX: '1000000',
      REDIS_URL: undefined,
      METRICS_TOKEN: undefined,
      BASE_URL: undefined,
      DATABASE_URL: cluster.primaryUrl,
      DATABASE_REPLICA_URL: cluster.replicaUrl,
      DATABASE_DIRECT_URL: undefined,
      DATABASE_POOL_WAIT_MS: String(POOL_WAIT_MS),
    },
    opts['api-port'],
  );
  const lines: string[] = [];
  api.child.stdout!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n')));
  const reports: FailoverReport[] = [];
  try {
    await waitForFirstResponse(api, '/api/v1/health?db=1', performance.now());
    for (let round = 1; round <= opts.rounds; round += 1) {
      const faults: Fault[] = ['kill', 'switchover'];
      log(`round ${round} of ${opts.rounds}: ${faults.join(', ')}`);
      reports.push(
        await runFailover({
          cluster,
          origin: api.origin,
          faults,
          writers: opts.writers,
          steadyMs: opts.steady * 1000,
          log,
        }),
      );
    }
  } finally {
    await stopProcess(api).catch(() => undefined);
    await cluster.stop();
  }
  const faults = reports.flatMap((r) => r.faults);
  const rows = [
    '| fault | primary before -> after | fault -> first 2xx write | first failed write -> first 2xx | failed writes | failed after recovery | cluster healthy | key revoked |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...faults.map(
      (f) =>
        `| ${f.fault === 'kill' ? 'kill -9' : 'switchover'} | ${f.from} -> ${f.to} | ` +
        `${(f.writeOutageMs / 1000).toFixed(2)} s | ${(f.clientOutageMs / 1000).toFixed(2)} s | ${f.failedWrites} | ` +
        `${f.failedAfterRecovery} | ` +
        `${(f.healthyAfterMs / 1000).toFixed(2)} s | ${(f.revokedAfterMs / 1000).toFixed(2)} s |`,
    ),
  ];
  const max = (pick: (r: FailoverReport) => number) => Math.max(...reports.map(pick));
  const total = (pick: (r: FailoverReport) => number) => reports.reduce((n, r) => n + pick(r), 0);
  const outages = (fault: Fault) =>
    faults.filter((f) => f.fault === fault).map((f) => f.writeOutageMs);
  const clientOutages = (fault: Fault) =>
    faults.filter((f) => f.fault === fault).map((f) => f.clientOutageMs);
  const summary = {
    rounds: opts.rounds,
    acknowledged: total((r) => r.acknowledged),
    lost: total((r) => r.lost),
    duplicates: total((r) => r.duplicates),
    unexpected: total((r) => r.unexpected),
    withoutRetryAfter: total((r) => r.withoutRetryAfter),
    longestWaitMs: max((r) => r.longestWaitMs),
    longestEventMs: max((r) => r.longestEventMs),
    eventsDrainedMs: max((r) => r.eventsDrainedMs),
    eventsMissing: total((r) => r.eventsMissing),
    eventsRepeated: total((r) => r.eventsRepeated),
    revokedAccepted: total((r) => r.revokedAccepted),
    failedAfterRecovery: faults.reduce((n, f) => n + f.failedAfterRecovery, 0),
    killOutageMaxMs: Math.max(0, ...outages('kill')),
    switchoverOutageMaxMs: Math.max(0, ...outages('switchover')),
    killClientOutageMaxMs: Math.max(0, ...clientOutages('kill')),
    switchoverClientOutageMaxMs: Math.max(0, ...clientOutages('switchover')),
  };
  const statuses = (kind: keyof FailoverReport['statuses']) =>
    counts(sum(reports.map((r) => r.statuses[kind])));
  // What an operator reads in the API's log during the run (docs/operations.md).
  const events: Record<string, number> = {};
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { event?: string; level?: number };
      if (entry.event) events[entry.event] = (events[entry.event] ?? 0) + 1;
    } catch {
      // not JSON
    }
  }
  process.stdout.write(
    [
      ...rows,
      '',
      '| measure | value |',
      '| --- | ---: |',
      `| rounds (one kill -9 and one switchover each) | ${summary.rounds} |`,
      `| acknowledged creates | ${summary.acknowledged} |`,
      `| acknowledged creates missing on the new primary | ${summary.lost} |`,
      `| Idempotency-Keys with two listings | ${summary.duplicates} |`,
      `| writes out after kill -9, from the fault (longest) | ${(summary.killOutageMaxMs / 1000).toFixed(2)} s |`,
      `| writes out after kill -9, from the first failure (longest) | ${(summary.killClientOutageMaxMs / 1000).toFixed(2)} s |`,
      `| writes out in a switchover, from patronictl (longest) | ${(summary.switchoverOutageMaxMs / 1000).toFixed(2)} s |`,
      `| writes out in a switchover, from the first failure (longest) | ${(summary.switchoverClientOutageMaxMs / 1000).toFixed(2)} s |`,
      `| the longest any request waited (long polls apart) | ${summary.longestWaitMs} ms |`,
      `| responses other than 2xx, 4xx and 503, or no answer | ${summary.unexpected} |`,
      `| 503 without Retry-After | ${summary.withoutRetryAfter} |`,
      `| write -> its event in the long poll (longest) | ${summary.longestEventMs} ms |`,
      `| end of load -> every event seen | ${summary.eventsDrainedMs} ms |`,
      `| events missing / repeated in the long poll | ${summary.eventsMissing} / ${summary.eventsRepeated} |`,
      `| a revoked key accepted afterwards | ${summary.revokedAccepted} |`,
      `| requests failed after the new primary answered | ${summary.failedAfterRecovery} |`,
      '',
      `writes: ${statuses('write')}`,
      `reads: ${statuses('read')}`,
      `long polls: ${statuses('poll')}`,
      `revoked-key probes: ${statuses('revoked')}`,
      `API log events: ${JSON.stringify(events)}`,
      '',
    ].join('\n'),
  );
  process.stdout.write(`${JSON.stringify({ summary, reports })}\n`);
  const broken =
    summary.lost > 0 ||
    summary.duplicates > 0 ||
    summary.unexpected > 0 ||
    summary.revokedAccepted > 0 ||
    summary.failedAfterRecovery > 0 ||
    summary.longestWaitMs > POOL_WAIT_MS + 500;
  return broken ? 1 : 0;
}

runMain('bench:failover', main);
