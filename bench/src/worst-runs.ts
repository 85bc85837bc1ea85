/**
 * Issue #42 item 6's runs, after the seed on the API server the bench started (each named by
 * --only alone: `worst`, `neighbours`, `stale-stats`). They go through HTTP only: the search
 * SQL can change under them.
 *
 *  - worst: every worst-case search (scenarios.ts worstCases) one at a time on the idle server
 *    (p50 / p99), then WORST_CONNECTIONS clients for `duration` seconds (pages a second and CPU
 *    per page), against the plain feed page measured the same way before, amid and after them;
 *  - neighbours: a feed reader at 4 requests a second alone, beside one client address sending
 *    worst-case searches at 280 a minute (under the shipped per-IP limit of 300), beside 20;
 *    on an API server of its own with the shipped rate limit;
 *  - stale-stats: the mixed load twice on a new seller with no ANALYZE between, then twice on
 *    another with one; the second runs' req/s compared.
 */
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { ArrivalResult, ArrivalSpec } from './arrivals.ts';
import type { LoadResult, LoadSpec } from './load.ts';
import {
  DEFAULT_RATE_LIMIT_PER_MINUTE,
  READER_PER_SECOND,
  readerSpec,
  SEARCHES_PER_MINUTE,
  searcherSpecs,
} from './neighbours.ts';
import type { BenchOptions } from './options.ts';
import { cpuSeconds, runInChild, stopProcess, type Server } from './processes.ts';
import {
  compareWithFeed,
  nonOk,
  searcherTotals,
  statusShare,
  type Measured,
  type NeighbourPhase,
  type NeighbourResults,
  type StaleStatsResults,
  type StaleStatsRun,
  type WorstCaseResults,
  type WorstCaseRun,
} from './results.ts';
import { FEED_PAGE, mixedSteps, worstCases, type WorstCase } from './scenarios.ts';
import { createRunDeveloper, type Fixtures } from './seed.ts';
import { percentile } from './arrivals.ts';

const ARRIVALS = fileURLToPath(new URL('arrivals.ts', import.meta.url));
const NEIGHBOURS = fileURLToPath(new URL('neighbours.ts', import.meta.url));

/** What the runs need of bench.ts's Bench. */
export interface BenchRunner {
  run(
    server: Server,
    request: Omit<LoadSpec, 'origin' | 'connections' | 'duration'>,
    duration: number,
    settle?: 'vacuum' | 'checkpoint',
    connections?: number,
  ): Promise<{ load: LoadResult; measured: Measured }>;
  arrivals(
    server: Server,
    spec: Omit<ArrivalSpec, 'origin'>,
    settle: 'vacuum' | 'checkpoint' | 'none',
  ): Promise<{ result: ArrivalResult; serverCpu: number }>;
  startApi(databaseUrl: string, env?: Record<string, string | undefined>): Promise<Server>;
  note(problem: string): void;
  readonly connections: number;
  readonly tmpDir: string;
}

/** The neighbours' server is warmed from this address, none of the phases' (127.0.0.1-22). */
const WARM_UP_ADDRESS = '127.0.0.200';

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const fixed = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/**
 * Sequential requests: at least IDLE_MIN, at most IDLE_MAX, while within IDLE_BUDGET_MS (a p99
 * of fewer than a hundred requests is their slowest: one scheduling hiccup of a shared machine).
 */
const IDLE_MIN = 20;
const IDLE_MAX = 200;
const IDLE_BUDGET_MS = 3000;

/**
 * The worst cases' closed loop: as many clients as the server runs searches at once (its
 * SEARCH_CONCURRENCY, 4 by default). More would measure the search gate's shedding (503s answered
 * at once, whose CPU the few pages served would carry) instead of what a page of each search
 * costs; the gate's own behaviour under more is the neighbours run's. The feed page is measured
 * with as many, so that the ratios compare like with like.
 */
const WORST_CONNECTIONS = 4;

/** GETs one at a time on one keep-alive connection; the first is not measured (a warm-up). */
export async function idleProbe(
  origin: string,
  request: { path: string; headers?: Record<string, string>; localAddress?: string },
  limits = { min: IDLE_MIN, max: IDLE_MAX, budgetMs: IDLE_BUDGET_MS },
): Promise<WorstCaseRun['idle']> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = () =>
    new Promise<string>((resolve, reject) => {
      http
        .get(
          `${origin}${request.path}`,
          {
            agent,
            headers: request.headers ?? {},
            ...(request.localAddress ? { localAddress: request.localAddress } : {}),
          },
          (answer) => {
            answer.resume();
            answer.on('end', () => resolve(String(answer.statusCode)));
            answer.on('error', reject);
          },
        )
        .on('error', reject);
    });
  const times: number[] = [];
  const statuses: Record<string, number> = {};
  try {
    await get();
    const began = performance.now();
    while (
      times.length < limits.min ||
      (times.length < limits.max && performance.now() - began < limits.budgetMs)
    ) {
      const started = performance.now();
      const status = await get();
      times.push(performance.now() - started);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  } finally {
    agent.destroy();
  }
  const sorted = Float64Array.from(times).sort();
  const round = (ms: number) => Math.round(ms * 100) / 100;
  return {
    requests: times.length,
    p50: round(percentile(sorted, 50)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted[sorted.length - 1] ?? 0),
    statuses,
  };
}

/**
 * Until no other statement of the bench database is running (at most `timeoutMs`): a search
 * cancelled on the client side may still run on PostgreSQL, and would land in the next run.
 */
async function waitForQuiet(admin: postgres.Sql, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let quiet = 0;
  while (performance.now() < deadline) {
    const [row] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state = 'active' and pid <> pg_backend_pid()`;
    quiet = row?.n === 0 ? quiet + 1 : 0;
    if (quiet >= 2) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * CPU seconds of the bench database's own backends (the API's pool), by pid: PostgreSQL here
 * serves other work too, whose backends come and go (cpuSecondsOf('postgres') counts them).
 */
async function backendCpu(admin: postgres.Sql): Promise<Map<number, number>> {
  const rows = await admin<{ pid: number }[]>`
    select pid from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`;
  return new Map(rows.map((r) => [r.pid, cpuSeconds(r.pid)]));
}

/** CPU seconds the backends used between two snapshots (one that left counts up to `before`). */
function backendCpuSince(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0);
  return total;
}

/** The ETag of the feed page: a real one, and stale for any other page. */
async function feedEtag(api: Server): Promise<string> {
  const answer = await fetch(api.origin + FEED_PAGE);
  await answer.arrayBuffer();
  const etag = answer.headers.get('etag');
  if (answer.status !== 200 || !etag)
    throw new Error(`the feed page answered ${answer.status} with ETag ${etag}`);
  return etag;
}

async function measureCase(
  bench: BenchRunner,
  api: Server,
  admin: postgres.Sql,
  c: Pick<WorstCase, 'name' | 'label' | 'path' | 'headers'> & { kind: WorstCaseRun['kind'] },
  duration: number,
): Promise<WorstCaseRun> {
  await waitForQuiet(admin);
  const idle = await idleProbe(api.origin, c);
  const before = await backendCpu(admin);
  const { load, measured } = await bench.run(
    api,
    { method: 'GET', paths: [c.path], ...(c.headers ? { headers: c.headers } : {}) },
    duration,
    'checkpoint',
    WORST_CONNECTIONS,
  );
  await waitForQuiet(admin);
  const postgresSeconds = backendCpuSince(before, await backendCpu(admin));
  const ok = load.statusCodes['200'] ?? 0;
  // CPU per page served: the CPU of every answer (503s included) over the 200s.
  const perPage = (us: number | null | undefined) =>
    us === null || us === undefined || ok === 0 ? null : (us * load.requests) / ok;
  const run: WorstCaseRun = {
    name: c.name,
    label: c.label,
    kind: c.kind,
    idle,
    load: {
      requests: load.requests,
      rps: load.rps,
      okRps: ok / load.durationS,
      p50: load.p50,
      p99: load.p99,
      errors: load.errors,
      statusCodes: load.statusCodes,
      durationS: load.durationS,
      cpuUs: perPage(measured.cpuUs),
      postgresCpuUs: ok === 0 ? null : (postgresSeconds * 1e6) / ok,
    },
  };
  log(
    `worst ${c.name.padEnd(22)} idle p50 ${fixed(idle.p50, 1)} p99 ${fixed(idle.p99, 1)} ms ${JSON.stringify(idle.statuses)}` +
      ` | load ${fixed(run.load.okRps)} pages/s of ${fixed(load.rps)} answers/s ${JSON.stringify(load.statusCodes)}` +
      ` | CPU µs/page API ${fixed(run.load.cpuUs ?? NaN)} PostgreSQL ${fixed(run.load.postgresCpuUs ?? NaN)}`,
  );
  return run;
}

/** The worst-case searches, with the feed page before, amid and after them. */
export async function runWorst(
  bench: BenchRunner,
  api: Server,
  databaseUrl: string,
  fixtures: Fixtures,
  options: Pick<BenchOptions, 'duration' | 'warmup'>,
): Promise<WorstCaseResults> {
  const cases = worstCases(fixtures, await feedEtag(api));
  const feedCase = {
    name: 'feed',
    label: 'the plain feed page (limit 24)',
    path: FEED_PAGE,
    kind: 'feed' as const,
  };
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    if (options.warmup > 0) {
      log(`worst-case searches: warming up on the feed page (${options.warmup} s)`);
      await bench.run(api, { method: 'GET', paths: [FEED_PAGE] }, options.warmup, 'vacuum');
    }
    const feed: WorstCaseRun[] = [];
    const searches: WorstCaseRun[] = [];
    const middle = Math.floor(cases.length / 2);
    feed.push(await measureCase(bench, api, admin, feedCase, options.duration));
    for (const [i, c] of cases.entries()) {
      if (i === middle) feed.push(await measureCase(bench, api, admin, feedCase, options.duration));
      searches.push(await measureCase(bench, api, admin, c, options.duration));
    }
    feed.push(await measureCase(bench, api, admin, feedCase, options.duration));
    await waitForQuiet(admin);
    const results = compareWithFeed(feed, searches, WORST_CONNECTIONS);
    for (const f of feed)
      if (nonOk({ statusCodes: f.load.statusCodes, errors: f.load.errors, late: 0 }) > 0)
        bench.note(`worst-case runs: the feed page answered ${JSON.stringify(f.load.statusCodes)}`);
    return results;
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/**
 * A feed reader alone, beside one searching client address, beside 20 (each its own, so no
 * per-IP counter carries from one phase to the next), `seconds` each, on an API server started
 * with the shipped rate limit (300 a minute per anonymous IP).
 */
export async function runNeighbours(
  bench: BenchRunner,
  databaseUrl: string,
  fixtures: Fixtures,
  seconds: number,
): Promise<NeighbourResults> {
  const api = await bench.startApi(databaseUrl, {
    RATE_LIMIT_MAX: undefined,
    RATE_LIMIT_WINDOW_MS: undefined,
  });
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  // The worst-case searches of every filter and sort (the stale ETag's is a plain search here).
  const paths = worstCases(fixtures, '""')
    .filter((c) => c.kind === 'no-match')
    .map((c) => c.path);
  const phases: NeighbourPhase[] = [];
  try {
    // A warm server (JIT, pool) for the reader alone too: the feed page and a few searches one
    // at a time, from an address of its own (under its per-IP limit).
    const warm = { localAddress: WARM_UP_ADDRESS };
    await idleProbe(api.origin, { path: FEED_PAGE, ...warm }, { min: 50, max: 50, budgetMs: 0 });
    for (const p of paths.slice(0, 5))
      await idleProbe(api.origin, { path: p, ...warm }, { min: 1, max: 1, budgetMs: 0 });
    for (const [name, count, firstIndex] of [
      ['the reader alone', 0, 0],
      ['beside 1 searching address', 1, 0],
      ['beside 20 searching addresses', 20, 1],
    ] as const) {
      await waitForQuiet(admin);
      await admin.unsafe('checkpoint');
      // Both generators start their warm-up together, once both processes are up.
      const startAt = Date.now() + 3000;
      const readerFile = path.join(bench.tmpDir, `reader-${phases.length}.json`);
      writeFileSync(
        readerFile,
        JSON.stringify(
          readerSpec({ origin: api.origin, path: FEED_PAGE, duration: seconds, startAt }),
        ),
      );
      const searchersFile = path.join(bench.tmpDir, `searchers-${phases.length}.json`);
      writeFileSync(
        searchersFile,
        JSON.stringify(
          searcherSpecs({
            origin: api.origin,
            count,
            firstIndex,
            paths,
            duration: seconds,
            startAt,
          }),
        ),
      );
      const [reader, searchers] = await Promise.all([
        runInChild<ArrivalResult>(ARRIVALS, [readerFile]),
        count > 0 ? runInChild<ArrivalResult[]>(NEIGHBOURS, [searchersFile]) : null,
      ]);
      const searches = searchers ? searcherTotals(searchers) : null;
      phases.push({ name, searchers: count, reader, searches });
      const share = (code: string) => (searches ? fixed(100 * statusShare(searches, code)) : '-');
      log(
        `neighbours, ${name}: reader p50 ${reader.p50} p99 ${reader.p99} ms, ${nonOk(reader)} not 200 ${JSON.stringify(reader.statusCodes)}` +
          (searches
            ? ` | searchers ${searches.requests} answers, 200 ${share('200')}%, 503 ${share('503')}%, 429 ${share('429')}%, ${searches.errors} errors, ${searches.late} late`
            : ''),
      );
    }
    await waitForQuiet(admin);
  } finally {
    await admin.end({ timeout: 5 });
    await stopProcess(api);
  }
  return {
    seconds,
    readerPerSecond: READER_PER_SECOND,
    searchesPerMinute: SEARCHES_PER_MINUTE,
    rateLimitPerMinute: DEFAULT_RATE_LIMIT_PER_MINUTE,
    phases,
  };
}

/** The seller's listings, the planner's estimate of them, and the table's changes unanalyzed. */
async function statistics(
  admin: postgres.Sql,
  sellerId: string,
): Promise<Pick<StaleStatsRun, 'sellerListings' | 'plannerEstimate' | 'modifiedSinceAnalyze'>> {
  const [count] = await admin<{ n: number }[]>`
    select count(*)::int as n from listings where seller_id = ${sellerId}`;
  const [plan] = await admin.unsafe<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }[]>(
    'explain (format json) select 1 from listings where seller_id = $1',
    [sellerId],
  );
  const [stat] = await admin<{ n: string | null }[]>`
    select n_mod_since_analyze::text as n from pg_stat_user_tables where relname = 'listings'`;
  return {
    sellerListings: count?.n ?? 0,
    plannerEstimate: plan?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? null,
    modifiedSinceAnalyze: stat?.n == null ? null : Number(stat.n),
  };
}

/**
 * The mixed load (feed pages, by-id misses, creates each with a new Idempotency-Key) twice on
 * a seller with nothing, without an ANALYZE between, then the same on another new seller with
 * an ANALYZE between; both start alike (VACUUM without ANALYZE, CHECKPOINT), so the statistics
 * are whatever the seed and earlier runs left. The ratio: the second runs' req/s.
 */
export async function runStaleStats(
  bench: BenchRunner,
  api: Server,
  databaseUrl: string,
  options: Pick<BenchOptions, 'staleStats' | 'skipSeedAnalyze'>,
): Promise<StaleStatsResults> {
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const stamp = Date.now().toString(36);
  const variants: StaleStatsResults['variants'] = [];
  try {
    for (const name of ['stale', 'analyzed'] as const) {
      const username = `${name}_${stamp}`;
      const developer = await createRunDeveloper(databaseUrl, username);
      const runs: StaleStatsRun[] = [];
      await waitForQuiet(admin);
      await admin.unsafe('vacuum listings, webhook_events, webhook_deliveries');
      for (const run of [1, 2]) {
        if (run === 2 && name === 'analyzed') await admin.unsafe('analyze');
        await admin.unsafe('checkpoint');
        const stats = await statistics(admin, developer.sellerId);
        const before = await backendCpu(admin);
        const { result, serverCpu } = await bench.arrivals(
          api,
          {
            steps: mixedSteps(developer.sandboxKey, `${name}-${run}-`),
            connections: bench.connections,
            duration: options.staleStats,
            warmup: 0,
          },
          'none',
        );
        await waitForQuiet(admin);
        const postgresCpu = backendCpuSince(before, await backendCpu(admin));
        const unexpected = Object.keys(result.statusCodes).filter(
          (c) => !['200', '201', '404'].includes(c),
        );
        if (result.errors > 0 || unexpected.length > 0)
          bench.note(
            `stale-stats ${name} run ${run}: ${result.errors} errors, statuses ${JSON.stringify(result.statusCodes)}`,
          );
        const perRequest = (s: number) => (result.requests ? (s * 1e6) / result.requests : null);
        runs.push({
          result,
          serverCpuUs: perRequest(serverCpu),
          postgresCpuUs: perRequest(postgresCpu),
          ...stats,
        });
        log(
          `stale-stats, ${name}, run ${run}: ${fixed(result.rps)} req/s, p50 ${result.p50} p99 ${result.p99} ms; ` +
            `seller had ${stats.sellerListings} listings, planner estimated ${stats.plannerEstimate}; ` +
            `${stats.modifiedSinceAnalyze} rows changed since ANALYZE; statuses ${JSON.stringify(result.statusCodes)}`,
        );
        await waitForQuiet(admin);
      }
      variants.push({ name, seller: username, runs });
    }
  } finally {
    await admin.end({ timeout: 5 });
  }
  const second = (name: string) => variants.find((v) => v.name === name)!.runs[1]!.result.rps;
  const ratio = second('stale') / second('analyzed');
  log(`stale-stats: second run without an ANALYZE / with one: ${fixed(ratio, 2)}`);
  return {
    connections: bench.connections,
    seconds: options.staleStats,
    seedAnalyzed: !options.skipSeedAnalyze,
    variants,
    ratio,
  };
}
