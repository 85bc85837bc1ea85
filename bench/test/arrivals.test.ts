/**
 * The bench's second load generator (bench/src/arrivals.ts) against a real local HTTP
 * server, and how issue #35's figures are kept: the mixed load's request sequence, the
 * targets' medians over several full runs, the runs kept in bench/results/runs/.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { percentile, runArrivals } from '../src/arrivals.ts';
import { keepRun, readRuns, runsTable } from '../src/report.ts';
import type { BenchResults } from '../src/results.ts';
import { mixedSteps } from '../src/scenarios.ts';
import { acrossRuns } from '../src/targets.ts';

/** A server that answers at once but holds every answer due in [stallFrom, stallUntil) ms. */
async function stallingServer(stallFrom: number, stallUntil: number) {
  const seen: { method: string; url: string; key: string | undefined }[] = [];
  let started = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      started ||= performance.now();
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        key: req.headers['idempotency-key'] as string | undefined,
      });
      const at = performance.now() - started;
      const answer = () => res.end('{}');
      // Time is the subject: a stall window during which the stub holds its answers.
      if (at >= stallFrom && at < stallUntil) setTimeout(answer, stallUntil - at);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, seen, close: () => new Promise((r) => server.close(r)) };
}

t.test('percentiles: the nearest rank', async (t) => {
  const values = Float64Array.from({ length: 1000 }, (_, i) => i + 1);
  t.equal(percentile(values, 50), 500);
  t.equal(percentile(values, 99), 990);
  t.equal(percentile(values, 99.9), 999);
  t.equal(percentile([], 99), 0);
});

t.test(
  'an open loop counts a stall in every request due during it; a closed loop hides it',
  async (t) => {
    // Half a second of stall 1.5 s into a 3 s run (after the 1 s warm-up, 0.5 s into the
    // measured part): at 200 requests a second, ~100 of the ~600 measured were due during it.
    const open = await stallingServer(1500, 2000);
    t.teardown(open.close);
    const steps = [{ method: 'GET' as const, paths: ['/a'] }];
    const openResult = await runArrivals({
      origin: open.origin,
      steps,
      connections: 2,
      duration: 2,
      rate: 200,
    });
    t.equal(openResult.mode, 'open');
    t.ok(Math.abs(openResult.requests - 400) <= 2, `~400 requests due (${openResult.requests})`);
    t.equal(openResult.late, 0);
    t.ok(openResult.p90 >= 100, `p90 ${openResult.p90} ms: the queued requests' wait counts`);
    t.ok(openResult.max >= 400 && openResult.max < 700, `max ${openResult.max} ms`);

    const closed = await stallingServer(1500, 2000);
    t.teardown(closed.close);
    const closedResult = await runArrivals({
      origin: closed.origin,
      steps,
      connections: 2,
      duration: 2,
    });
    t.equal(closedResult.mode, 'closed');
    // Unpaced, it sends as fast as answers come: more than the open loop's 400 due (over 1,000 on
    // a quiet machine; a fixed count would measure the machine, not the loop).
    t.ok(
      closedResult.requests > openResult.requests,
      `${closedResult.requests} requests, more than the open loop's ${openResult.requests}`,
    );
    t.ok(
      closedResult.p90 < 20,
      `closed loop p90 ${closedResult.p90} ms: only the two requests in flight waited`,
    );
    t.ok(closedResult.max >= 400, `but its max saw the stall (${closedResult.max} ms)`);
  },
);

t.test('the mixed load: its sequence, and every key replayed by the second half', async (t) => {
  const steps = mixedSteps('sk_sandbox_example');
  const kinds = steps.map((s) => `${s.method} ${s.paths[0]!.split('?')[0]!.slice(0, 25)}`);
  t.same(kinds, [
    'GET /api/v1/listings',
    'GET /api/v1/listings/00000000',
    'POST /api/v1/listings',
    'POST /api/v1/listings',
    'POST /api/v1/listings',
  ]);
  const server = await stallingServer(Infinity, Infinity);
  t.teardown(server.close);
  const half = () =>
    runArrivals({ origin: server.origin, steps, connections: 1, duration: 0.3, warmup: 0 });
  const counted = await half();
  t.same(Object.keys(counted.byStep).sort(), ['by-id miss', 'create', 'feed page']);
  const creates = counted.byStep.create!.requests;
  const feeds = counted.byStep['feed page']!.requests;
  t.ok(Math.abs(creates - 3 * feeds) <= 3, `latencies by kind: ${creates} creates, ${feeds} pages`);
  const first = server.seen.splice(0);
  await half();
  const second = server.seen.splice(0);
  const keys = (seen: typeof first) => seen.filter((r) => r.method === 'POST').map((r) => r.key);
  t.equal(new Set(keys(first)).size, keys(first).length, 'no key twice within a half');
  t.ok(keys(first).length > 10);
  const shared = Math.min(keys(first).length, keys(second).length);
  t.same(keys(second).slice(0, shared), keys(first).slice(0, shared), 'the same keys again');
  const share = (method: string, prefix: string) =>
    first.filter((r) => r.method === method && r.url.startsWith(prefix)).length / first.length;
  t.ok(Math.abs(share('POST', '/api/v1/listings') - 0.6) < 0.05, 'three in five are creates');
  t.ok(Math.abs(share('GET', '/api/v1/listings/') - 0.2) < 0.05, 'one in five a by-id read');
});

/** A run with one judged target (the feed's CPU ratio) and the given date. */
function runOf(date: string, apiCpu: number): BenchResults {
  return {
    date,
    scenarios: [
      {
        name: 'list',
        label: 'list',
        baseline: 'list',
        cpu: { api: apiCpu, bare: 500, peer: null, postgresApi: null, postgresBare: null },
      },
    ],
    rounds: [],
    settings: { connections: 50 },
    startup: null,
  } as unknown as BenchResults;
}

t.test('targets over several runs: each run beside the others, the median judged', async (t) => {
  const runs = [runOf('2026-11-27T04:00:00.000Z', 800), runOf('2026-11-27T04:20:00.000Z', 650)];
  runs.push(runOf('2026-11-27T04:40:00.000Z', 690));
  const [feed] = acrossRuns(runs);
  t.match(feed, {
    name: "list: API CPU per request / the bare route's",
    target: '<= 1.4x',
    values: ['1.60 (800 against 500 µs)', '1.30 (650 against 500 µs)', '1.38 (690 against 500 µs)'],
    median: 1.38,
    met: true,
  });
  const table = runsTable(runs).join('\n');
  t.match(table, /last 3 full runs \(2026-11-27 04:00, 2026-11-27 04:20, 2026-11-27 04:40 UTC\)/);
  t.match(table, /\| list: API CPU .* \| 1\.38 \| yes \|/);
  t.same(runsTable(runs.slice(0, 1)), [], 'one run has no medians to show');
});

t.test('bench/results/runs keeps the newest three full runs', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-runs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const hour of ['01', '02', '03', '04'])
    keepRun(runOf(`2026-11-27T${hour}:00:00.000Z`, 700), dir);
  t.same(readdirSync(dir).sort(), [
    '2026-11-27T02-00-00-000Z.json',
    '2026-11-27T03-00-00-000Z.json',
    '2026-11-27T04-00-00-000Z.json',
  ]);
  t.same(
    readRuns(dir).map((r) => r.date),
    ['2026-11-27T02:00:00.000Z', '2026-11-27T03:00:00.000Z', '2026-11-27T04:00:00.000Z'],
    'oldest first',
  );
});
