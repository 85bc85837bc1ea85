/**
 * `npm run bench`: the API's main paths measured side by side with bare baselines on the same
 * machine in the same run (docs/performance.md).
 *
 *  1. a database of its own on the PostgreSQL server (bench_<timestamp>, dropped at the end),
 *     migrated and seeded set-based (seed.ts);
 *  2. the API server, built first (`npm run build`) and started as `npm start` starts it
 *     (`node --enable-source-maps dist/server.js`), and the bare baseline server
 * (baseline-server.ts), each its own process on loopback;
 *  3. per round, every scenario against the API and then against its baseline (the order flips
 *     each round), each run a separate autocannon process bounded in time, the server's RSS
 *     sampled from /proc meanwhile;
 *  4. the time to the first response of fresh starts (PostgreSQL, embedded database empty and
 *     existing);
 *  5. medians of the rounds, ratios API/baseline within a round, the targets; written to
 *     bench/results/results.json (--out) and printed; --update-readme also rewrites the summary
 *     of docs/performance.md and the tables of bench/RESULTS.md.
 *
 * Exits non-zero when a run saw errors or unexpected statuses (the figures would be wrong),
 * not when a target is missed: the table says that.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import postgres from 'postgres';
import type { ArrivalResult, ArrivalSpec, ArrivalStep } from './arrivals.ts';
import type { LoadResult, LoadSpec } from './load.ts';
import { EXTRA_RUNS, parseOptions, UsageError, type BenchOptions } from './options.ts';
import {
  freePort,
  runInChild,
  sampleRss,
  cpuSeconds,
  cpuSecondsOf,
  startCommand,
  startProcess,
  stopProcess,
  TSX,
  waitForFirstResponse,
  type Server,
  runMain,
} from './processes.ts';
import {
  keepRun,
  readRuns,
  RESULTS_DOC,
  SUMMARY_DOC,
  writeReport,
  writeWorstReport,
} from './report.ts';
import {
  describeRun,
  markdownTables,
  measured,
  median,
  unjudgeable,
  type MixedLoad,
  OPEN_LOOP_SHARE,
  openMeasured,
  prettyBytes,
  summarize,
  type BenchResults,
  type Measured,
  type RoundResult,
  type SearchProbe,
  type StartupResult,
  type SustainedLoad,
  sustainedLoad,
} from './results.ts';
import { defineScenarios, mixedSteps, type Baseline, type Scenario } from './scenarios.ts';
import { probeSearch } from './search-probe.ts';
import {
  createBenchDatabase,
  createRunDeveloper,
  keepFixtures,
  openKeptDatabase,
  reuseName,
  seed,
  type BenchDatabase,
  type Fixtures,
} from './seed.ts';
import { runNeighbours, runStaleStats, runWorst } from './worst-runs.ts';
import { evaluateTargets } from './targets.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** How `npm start` runs the server once `npm run build` has bundled it. */
const SERVER = startCommand(root);
const BASELINE = path.join(root, 'bench/src/baseline-server.ts');
const PEER = path.join(root, 'bench/src/peer-server.ts');
const LOAD = path.join(root, 'bench/src/load.ts');
const ARRIVALS = path.join(root, 'bench/src/arrivals.ts');
const RATE_LIMIT_MAX = 1_000_000; // the config's maximum: 50 connections never reach it in a minute
const POOL_SIZE = 10; // src/db/client.ts default; the baseline uses the same
const HEALTH = '/api/v1/health?db=1';

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

class Bench {
  private readonly tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-'));
  private specCount = 0;
  readonly warnings: string[] = [];
  /** The bench database, once seeded (see settle). */
  databaseUrl: string | undefined;
  private admin: postgres.Sql | undefined;

  constructor(private readonly options: BenchOptions) {}

  apiEnv(databaseUrl: string): Record<string, string | undefined> {
    return {
      DATABASE_URL: databaseUrl,
      NODE_ENV: 'production',
      SESSION_SECRET: randomBytes(32).toString('base64url'),
      LOG_LEVEL: this.options.logLevel,
      RATE_LIMIT_MAX: String(RATE_LIMIT_MAX),
      RATE_LIMIT_WINDOW_MS: '60000',
      // Metrics on, as operators run it (docs/metrics.md); BENCH_METRICS=0 measures without.
      METRICS_TOKEN:
        process.env.BENCH_METRICS === '0' ? undefined : randomBytes(24).toString('hex'),
      // The portal's request log on, as it ships (docs/portal.md); BENCH_REQUEST_LOGS=0 without.
      REQUEST_LOGS: process.env.BENCH_REQUEST_LOGS === '0' ? 'false' : 'true',
      REDIS_URL: undefined,
      HOST: '127.0.0.1',
      BASE_URL: undefined,
    };
  }

  /** `env` over apiEnv's (the neighbours' server: the shipped rate limit). */
  async startApi(
    databaseUrl: string,
    env: Record<string, string | undefined> = {},
  ): Promise<Server> {
    const port = await freePort();
    const profile = this.options.cpuProf
      ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(this.options.cpuProf)]
      : [];
    const args = [...profile, ...this.options.serverFlags, ...SERVER];
    const server = startProcess('API server', args, { ...this.apiEnv(databaseUrl), ...env }, port);
    await waitForFirstResponse(server, HEALTH, performance.now());
    return server;
  }

  async startBaseline(databaseUrl: string, fixtures: Fixtures): Promise<Server> {
    return this.startComparison('baseline server', BASELINE, '/const', databaseUrl, fixtures);
  }

  /** The Express 5 + express-openapi-validator peer (peer-server.ts). */
  async startPeer(databaseUrl: string, fixtures: Fixtures): Promise<Server> {
    return this.startComparison(
      'peer server',
      PEER,
      '/api/v1/listings?limit=1',
      databaseUrl,
      fixtures,
    );
  }

  private async startComparison(
    name: string,
    script: string,
    ready: string,
    databaseUrl: string,
    fixtures: Fixtures,
  ): Promise<Server> {
    const port = await freePort();
    const server = startProcess(
      name,
      [...TSX, script],
      {
        DATABASE_URL: databaseUrl,
        BENCH_SELLER_ID: fixtures.sellerId,
        BENCH_APP_ID: fixtures.appId,
        BENCH_POOL: String(POOL_SIZE),
      },
      port,
    );
    await waitForFirstResponse(server, ready, performance.now());
    return server;
  }

  /**
   * VACUUM (ANALYZE) of the written tables and a CHECKPOINT before each run: otherwise
   * autovacuum, woken by the earlier runs' rows, or a checkpoint that their WAL triggers lands
   * inside some run (full-page writes after a checkpoint slow every commit), and that run's p99
   * measures PostgreSQL's housekeeping, not the stack. Needs a superuser (postgres).
   */
  async settle(databaseUrl: string): Promise<void> {
    this.admin ??= postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await this.admin.unsafe('vacuum (analyze) listings, webhook_events, webhook_deliveries');
    await this.admin.unsafe('checkpoint');
  }

  /** One autocannon run in its own process, with the target's RSS sampled meanwhile. */
  async load(
    server: Server,
    request: Omit<LoadSpec, 'origin' | 'connections' | 'duration'>,
    duration: number,
    connections = this.options.connections,
  ): Promise<Measured> {
    return (await this.run(server, request, duration, 'vacuum', connections)).measured;
  }

  /** A scenario's clients: its own (a search's: what the gate admits), at most the run's. */
  connectionsOf(scenario: Scenario): number {
    return Math.min(scenario.connections ?? this.options.connections, this.options.connections);
  }

  /**
   * The same, with autocannon's own result (answers per second included). `settle`
   * 'checkpoint': after runs that wrote nothing (the worst-case searches).
   */
  async run(
    server: Server,
    request: Omit<LoadSpec, 'origin' | 'connections' | 'duration'>,
    duration: number,
    settle: 'vacuum' | 'checkpoint' = 'vacuum',
    connections = this.options.connections,
  ): Promise<{ load: LoadResult; measured: Measured }> {
    if (this.databaseUrl && settle === 'vacuum') await this.settle(this.databaseUrl);
    else if (this.databaseUrl) {
      this.admin ??= postgres(this.databaseUrl, { max: 1, onnotice: () => {} });
      await this.admin.unsafe('checkpoint');
    }
    const spec: LoadSpec = {
      ...request,
      origin: server.origin,
      connections,
      duration,
    };
    const file = path.join(this.tmp, `spec-${(this.specCount += 1)}.json`);
    writeFileSync(file, JSON.stringify(spec));
    const sampler = sampleRss(server.child.pid!);
    const before = { server: cpuSeconds(server.child.pid!), postgres: cpuSecondsOf('postgres') };
    let result: LoadResult;
    let peak: number | null = null;
    try {
      result = await runInChild<LoadResult>(LOAD, [file]);
    } finally {
      peak = sampler.stop();
    }
    if (server.child.exitCode !== null)
      throw new Error(`${server.name} died during the load:\n${server.output()}`);
    return {
      load: result,
      measured: measured(result, peak, {
        server: cpuSeconds(server.child.pid!) - before.server,
        postgres: cpuSecondsOf('postgres') - before.postgres,
      }),
    };
  }

  /**
   * One run of the second generator (arrivals.ts: an open loop at `rate`, or a closed mix),
   * with the server's and PostgreSQL's CPU seconds over it. `settle` false: straight after the
   * run before (the mixed load's second half follows its first as an operator's would).
   */
  async arrivals(
    server: Server,
    spec: Omit<ArrivalSpec, 'origin'>,
    settle: 'vacuum' | 'checkpoint' | 'none',
  ): Promise<{ result: ArrivalResult; serverCpu: number; postgresCpu: number }> {
    if (settle === 'vacuum' && this.databaseUrl) await this.settle(this.databaseUrl);
    if (settle === 'checkpoint') await this.admin?.unsafe('checkpoint');
    const file = path.join(this.tmp, `spec-${(this.specCount += 1)}.json`);
    writeFileSync(file, JSON.stringify({ ...spec, origin: server.origin }));
    const before = { server: cpuSeconds(server.child.pid!), postgres: cpuSecondsOf('postgres') };
    const result = await runInChild<ArrivalResult>(ARRIVALS, [file]);
    if (server.child.exitCode !== null)
      throw new Error(`${server.name} died during the load:\n${server.output()}`);
    return {
      result,
      serverCpu: cpuSeconds(server.child.pid!) - before.server,
      postgresCpu: cpuSecondsOf('postgres') - before.postgres,
    };
  }

  check(what: string, m: Measured, status: number | number[] | '2xx'): void {
    if (status !== '2xx') {
      const why = unjudgeable(m, Array.isArray(status) ? status : [status]);
      if (why) this.note(`${what}: ${why}`);
      return;
    }
    const unexpected = Object.keys(m.statusCodes).filter((code) => !code.startsWith('2'));
    if (m.errors > 0 || unexpected.length > 0 || m.requests === 0) {
      this.note(
        `${what}: ${m.requests} answers, ${m.errors} errors, statuses ${JSON.stringify(m.statusCodes)} (expected ${status})`,
      );
    }
  }

  async cleanup(): Promise<void> {
    await this.admin?.end({ timeout: 5 });
    rmSync(this.tmp, { recursive: true, force: true });
  }

  get tmpDir(): string {
    return this.tmp;
  }

  get connections(): number {
    return this.options.connections;
  }

  /** A problem that makes the run's figures doubtful: warned now, and kept in the results. */
  note(problem: string): void {
    this.warnings.push(problem);
    log(`WARNING ${problem}`);
  }
}

async function getJson(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const response = await fetch(url, init);
  return { status: response.status, body: await response.json() };
}

/** Two envelopes with the same data and meta, but for meta.request_id (each request's own). */
function sameAnswer(a: any, b: any): boolean {
  const { request_id: _a, ...metaA } = a.meta;
  const { request_id: _b, ...metaB } = b.meta;
  return isDeepStrictEqual(a.data, b.data) && isDeepStrictEqual(metaA, metaB);
}

/** The baseline must answer what the API answers, or the ratio compares different work. */
async function verifyEquivalence(
  api: Server,
  baseline: Server,
  fixtures: Fixtures,
  scenarios: Scenario[],
  baselines: Baseline[],
): Promise<void> {
  for (const scenario of scenarios.filter(
    (s) => s.api.method === 'GET' && s.status === 200 && s.baseline,
  )) {
    const base = baselines.find((b) => b.name === scenario.baseline)!;
    const a = await getJson(api.origin + scenario.api.paths[0]);
    const b = await getJson(baseline.origin + base.request.paths[0]);
    if (a.status !== 200 || b.status !== 200)
      throw new Error(`${scenario.name}: API answered ${a.status}, baseline ${b.status}`);
    if (!sameAnswer(a.body, b.body)) {
      throw new Error(
        `${scenario.name}: the baseline's JSON differs from the API's; the comparison would be unfair`,
      );
    }
  }
  if (fixtures.liveIds.length === 0 || fixtures.ownSandboxIds.length === 0)
    throw new Error('the seed produced no listings');
}

/**
 * Each search answers 200 before the load (a 400 or 503 would make its req/s meaningless); the
 * items of its first page are logged, a page short of its limit being a search with few matches.
 */
async function verifySearches(api: Server, scenarios: Scenario[]): Promise<void> {
  for (const scenario of scenarios.filter((s) => s.name.startsWith('search-'))) {
    const answer = await getJson(api.origin + scenario.api.paths[0], {
      headers: scenario.api.headers ?? {},
    });
    if (answer.status !== 200)
      throw new Error(`${scenario.name}: answered ${answer.status} ${JSON.stringify(answer.body)}`);
    log(`${scenario.name}: a page of ${answer.body.data.length} listings`);
  }
}

/** The peer must answer what the API answers too: the same JSON for reads, a 201 for creates. */
async function verifyPeer(api: Server, peer: Server, scenarios: Scenario[]): Promise<void> {
  for (const scenario of scenarios.filter((s) => s.peer)) {
    const init = {
      method: scenario.api.method,
      headers: { 'content-type': 'application/json', ...scenario.api.headers },
      body: scenario.api.bodies?.[0],
    };
    const a = await getJson(api.origin + scenario.api.paths[0], init);
    const b = await getJson(peer.origin + scenario.api.paths[0], init);
    if (a.status !== scenario.status || b.status !== scenario.status)
      throw new Error(`${scenario.name}: API answered ${a.status}, the peer ${b.status}`);
    const comparable =
      scenario.api.method === 'GET'
        ? sameAnswer(a.body, b.body)
        : // Two creates: the same fields, all but the new listing's own id and times.
          sameAnswer(
            ...([a.body, b.body].map((x) => ({
              meta: x.meta,
              data: { ...x.data, id: '', published_at: '', created_at: '', updated_at: '' },
            })) as [unknown, unknown]),
          );
    if (!comparable) throw new Error(`${scenario.name}: the peer's JSON differs from the API's`);
  }
}

/**
 * Each replay key is used once first, so every measured request is a replay (200). Before that,
 * one create without a key: until an app has created a sandbox listing in the server process,
 * each of its POSTs takes the transaction path (its go-live milestone may be due), and an app
 * that only upserts never leaves it. The bench app has created listings by then; the crowded
 * seller's, whose inventory was seeded, must be in the same state, or replay-crowded would
 * measure that path instead of the inventory.
 */
async function primeReplays(api: Server, scenario: Scenario): Promise<void> {
  const created = await fetch(api.origin + scenario.api.paths[0], {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...scenario.api.headers },
    body: scenario.api.bodies![0],
  });
  await created.arrayBuffer();
  if (created.status !== 201) throw new Error(`priming a create answered ${created.status}`);
  const variants = scenario.api.headerVariants ?? [];
  for (let i = 0; i < variants.length; i += 20) {
    await Promise.all(
      variants.slice(i, i + 20).map(async (variant) => {
        const response = await fetch(api.origin + scenario.api.paths[0], {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...scenario.api.headers, ...variant },
          body: scenario.api.bodies![0],
        });
        await response.arrayBuffer();
        if (response.status !== 201 && response.status !== 200)
          throw new Error(`priming a replay key answered ${response.status}`);
      }),
    );
  }
}

async function measureStartups(
  bench: Bench,
  options: BenchOptions,
  databaseUrl: string,
): Promise<StartupResult> {
  const result: StartupResult = {
    postgresMs: [],
    pgliteExistingMs: [],
    pgliteEmptyMs: [],
    pgliteEmptyRssMB: null,
    pgliteExistingRssMB: null,
  };
  const emptyRss: number[] = [];
  const existingRss: number[] = [];
  // As `npm start` runs: no NODE_ENV (the embedded database's first start creates the demo
  // account).
  const common = {
    NODE_ENV: undefined,
    LOG_LEVEL: 'warn',
    REDIS_URL: undefined,
    BASE_URL: undefined,
    HOST: '127.0.0.1',
  };
  const timeStart = async (name: string, env: Record<string, string | undefined>) => {
    const port = await freePort();
    const started = performance.now();
    const server = startProcess(name, SERVER, { ...common, ...env }, port);
    const sampler = sampleRss(server.child.pid!, 20);
    try {
      const elapsed = await waitForFirstResponse(server, HEALTH, started);
      return { ms: elapsed, rss: sampler.stop() };
    } finally {
      sampler.stop();
      await stopProcess(server);
    }
  };
  for (let round = 1; round <= options.startupRounds; round += 1) {
    const pg = await timeStart('API server (PostgreSQL start)', { DATABASE_URL: databaseUrl });
    result.postgresMs.push(pg.ms);
    const dir = path.join(bench.tmpDir, `pglite-${round}`);
    const empty = await timeStart('API server (embedded, empty directory)', {
      DATABASE_URL: undefined,
      PGLITE_DIR: dir,
    });
    result.pgliteEmptyMs.push(empty.ms);
    if (empty.rss !== null) emptyRss.push(empty.rss);
    const existing = await timeStart('API server (embedded, existing directory)', {
      DATABASE_URL: undefined,
      PGLITE_DIR: dir,
    });
    result.pgliteExistingMs.push(existing.ms);
    if (existing.rss !== null) existingRss.push(existing.rss);
    rmSync(dir, { recursive: true, force: true });
    log(
      `start ${round}: PostgreSQL ${pg.ms.toFixed(0)} ms, embedded empty ${empty.ms.toFixed(0)} ms, existing ${existing.ms.toFixed(0)} ms`,
    );
  }
  result.pgliteEmptyRssMB = emptyRss.length ? Math.max(...emptyRss) / 2 ** 20 : null;
  result.pgliteExistingRssMB = existingRss.length ? Math.max(...existingRss) / 2 ** 20 : null;
  return result;
}

async function postgresVersion(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ v: string }[]>`select split_part(version(), ' on ', 1) as v`;
    return row?.v ?? 'PostgreSQL';
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The three servers a scenario runs against. */
interface Sides {
  api: Server;
  baseline: Server;
  peer: Server;
}

/** The run, top-down: each step is a function below, in this order. */
async function main(): Promise<number> {
  const options = readOptions();
  if (!options) return 2;
  const began = performance.now();
  const loadAverageStart = noteLoadAverage();
  log('building the server (npm run build)');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  const bench = new Bench(options);
  const { database, kept } = await openDatabaseFor(options);
  log(`database ${database.name}${kept ? ' (kept, seeded by an earlier run)' : ''}`);
  const keep = options.keep || options.reuse;
  const servers: Server[] = [];
  cleanUpOnSignal(servers, bench, database, keep);
  try {
    const { fixtures, seedMs } = kept ?? (await seedDatabase(database, options));
    // From here on every run settles the database first (Bench.settle).
    bench.databaseUrl = database.url;
    logSeed(fixtures, seedMs);
    if (kept) {
      // A kept database's mixed seller holds the last run's creates: a new one with nothing.
      fixtures.mixed = await createRunDeveloper(database.url, `mixed_${Date.now().toString(36)}`);
    }
    const { scenarios, baselines } = chooseScenarios(fixtures, options.only);
    // Issue #42's runs alone need the API only: no bare route, no peer, no rounds.
    const extrasOnly = options.only?.every((n) => (EXTRA_RUNS as readonly string[]).includes(n));
    const rounds: RoundResult[] = [];
    let api: Server;
    let sustained: SustainedLoad | null = null;
    let mixed: MixedLoad | null = null;
    if (extrasOnly) {
      api = await bench.startApi(database.url);
      servers.push(api);
    } else {
      const sides = await startServers(
        bench,
        database.url,
        fixtures,
        scenarios,
        baselines,
        servers,
      );
      api = sides.api;
      await prepareClients(sides.api, scenarios);
      await warmUp(bench, sides, scenarios, baselines, options.warmup);
      for (let round = 1; round <= options.rounds; round += 1)
        rounds.push(
          await runRound(bench, sides, scenarios, baselines, round, options.duration, options.open),
        );
      sustained = await runSustained(bench, sides.api, scenarios, options.sustained);
      mixed = await runMixed(bench, sides.api, database.url, fixtures, options);
    }
    const search = await probeSearches(bench, api, database.url, fixtures, scenarios);
    const extras = await runExtras(bench, api, database.url, fixtures, options);
    for (const server of servers.splice(0)) await stopProcess(server);
    if (options.cpuProf)
      log(`CPU profile of the API server written to ${path.resolve(options.cpuProf)}`);
    // Issue #42's runs alone are about searches and load, not starts.
    const startup =
      options.skipStartup || extrasOnly
        ? null
        : await measureStartups(bench, options, database.url);
    const results = await collectResults(options, {
      loadAverageStart,
      fixtures,
      seedMs,
      ...summarize(rounds, scenarios, baselines),
      startup,
      sustained,
      mixed,
      search,
      ...extras,
      rounds,
      warnings: bench.warnings,
      reused: kept !== null,
    });
    const out = writeResults(results, options);
    printResults(results);
    // The webhook delivery scenarios (bench/src/webhooks.ts) follow a whole run.
    if (!options.only && !options.skipWebhooks) runWebhookBench(options);
    return finish(results, out, began);
  } finally {
    for (const server of servers) await stopProcess(server).catch(() => undefined);
    await bench.cleanup();
    if (keep) log(`kept database ${database.name}`);
    else await database.drop();
  }
}

/** A new database, or with --reuse the kept one of this seed (and its fixtures, if seeded). */
async function openDatabaseFor(options: BenchOptions): Promise<{
  database: BenchDatabase;
  kept: { fixtures: Fixtures; seedMs: number } | null;
}> {
  if (!options.reuse)
    return { database: await createBenchDatabase(options.databaseUrl), kept: null };
  return openKeptDatabase(options.databaseUrl, reuseName(options, !options.skipSeedAnalyze));
}

/** Seeds the database (and with --reuse records the seed in it for the next run). */
async function seedDatabase(
  database: BenchDatabase,
  options: BenchOptions,
): Promise<{ fixtures: Fixtures; seedMs: number }> {
  const started = performance.now();
  const fixtures = await seed(database.url, options, { analyze: !options.skipSeedAnalyze });
  const seedMs = performance.now() - started;
  if (options.reuse) await keepFixtures(database.url, fixtures, seedMs);
  return { fixtures, seedMs };
}

/** Issue #42 item 6's runs that --only names: worst-case searches, neighbours, stale stats. */
async function runExtras(
  bench: Bench,
  api: Server,
  databaseUrl: string,
  fixtures: Fixtures,
  options: BenchOptions,
): Promise<Pick<BenchResults, 'worst' | 'neighbours' | 'staleStats'>> {
  const named = (name: (typeof EXTRA_RUNS)[number]) => options.only?.includes(name) ?? false;
  const worst = named('worst') ? await runWorst(bench, api, databaseUrl, fixtures, options) : null;
  const neighbours =
    named('neighbours') && options.neighbours > 0
      ? await runNeighbours(bench, databaseUrl, fixtures, options.neighbours)
      : null;
  const staleStats =
    named('stale-stats') && options.staleStats > 0
      ? await runStaleStats(bench, api, databaseUrl, options)
      : null;
  return { worst, neighbours, staleStats };
}

/** The options, or null after a usage error (exit code 2). */
function readOptions(): BenchOptions | null {
  try {
    return parseOptions(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n`);
      return null;
    }
    throw err;
  }
}

/** The load average at the start, with a warning when other work already fills the cores. */
function noteLoadAverage(): number[] {
  const loadAverage = os.loadavg();
  if (loadAverage[0]! > os.cpus().length) {
    log(
      `load average ${loadAverage[0]!.toFixed(1)} on ${os.cpus().length} cores: other work is running, expect noisy figures`,
    );
  }
  return loadAverage;
}

/** Ctrl-C or a kill: stop the servers and drop the database before leaving. */
function cleanUpOnSignal(
  servers: Server[],
  bench: Bench,
  database: BenchDatabase,
  keep: boolean,
): void {
  const interrupted = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the servers and dropping ${database.name}`);
    for (const server of servers) server.child.kill('SIGTERM');
    bench
      .cleanup()
      .then(() => (keep ? undefined : database.drop()))
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
}

function logSeed(fixtures: Fixtures, seedMs: number): void {
  log(
    `seeded ${fixtures.counts.total} listings (${fixtures.counts.live} live active, ` +
      `${fixtures.counts.crowded} of the crowded seller) in ${(seedMs / 1000).toFixed(1)} s; ` +
      `database ${prettyBytes(fixtures.databaseBytes)}`,
  );
}

/** The scenarios --only names (`search` names every search), and the bare routes they need. */
function chooseScenarios(
  fixtures: Fixtures,
  only: string[] | undefined,
): { scenarios: Scenario[]; baselines: Baseline[] } {
  const all = defineScenarios(fixtures);
  const chosen = (name: string) =>
    !only || only.includes(name) || (name.startsWith('search-') && only.includes('search'));
  const scenarios = all.scenarios.filter((s) => chosen(s.name));
  // `--only mixed`: the mixed load alone, after a round of the constant route; issue #42's
  // runs (EXTRA_RUNS) alone: no round.
  const extras = only?.some((n) => n === 'mixed' || (EXTRA_RUNS as readonly string[]).includes(n));
  if (scenarios.length === 0 && !extras)
    throw new UsageError(
      `--only matches no scenario (${all.scenarios.map((s) => s.name).join(', ')})`,
    );
  const baselines = all.baselines.filter(
    (b) =>
      b.name === 'const' ||
      scenarios.some((s) => s.baseline === b.name || s.alsoBaselines?.includes(b.name)),
  );
  return { scenarios, baselines };
}

/** The API, the bare baseline and the peer, each checked to answer what the API answers. */
async function startServers(
  bench: Bench,
  databaseUrl: string,
  fixtures: Fixtures,
  scenarios: Scenario[],
  baselines: Baseline[],
  servers: Server[],
): Promise<Sides> {
  const api = await bench.startApi(databaseUrl);
  servers.push(api);
  const baseline = await bench.startBaseline(databaseUrl, fixtures);
  servers.push(baseline);
  await verifyEquivalence(api, baseline, fixtures, scenarios, baselines);
  await verifySearches(api, scenarios);
  const peer = await bench.startPeer(databaseUrl, fixtures);
  servers.push(peer);
  await verifyPeer(api, peer, scenarios);
  return { api, baseline, peer };
}

/** What the clients hold before the load: the polling client's ETag, used replay keys. */
async function prepareClients(api: Server, scenarios: Scenario[]): Promise<void> {
  const poll = scenarios.find((s) => s.name === 'poll');
  if (poll) {
    // The ETag the polling client holds: the live feed does not change during the run (the
    // writes are the sandbox key's).
    const answer = await fetch(api.origin + poll.api.paths[0]);
    await answer.arrayBuffer();
    poll.api.headers = { 'if-none-match': answer.headers.get('etag') ?? '' };
  }
  // Every scenario that sends idempotency keys (the replay, and the crowded seller's).
  for (const s of scenarios.filter((x) =>
    x.api.headerVariants?.some((v) => 'idempotency-key' in v),
  ))
    await primeReplays(api, s);
}

async function warmUp(
  bench: Bench,
  sides: Sides,
  scenarios: Scenario[],
  baselines: Baseline[],
  seconds: number,
): Promise<void> {
  if (seconds <= 0) return;
  log(`warming up (${seconds} s per scenario, not measured)`);
  for (const scenario of scenarios)
    await bench.load(sides.api, scenario.api, seconds, bench.connectionsOf(scenario));
  for (const b of baselines) await bench.load(sides.baseline, b.request, seconds);
  for (const scenario of scenarios.filter((s) => s.peer))
    await bench.load(sides.peer, scenario.api, seconds);
}

/**
 * One round: the constant route, then every scenario against the API, its bare route and the
 * peer back to back, the order alternating between rounds so a slow drift of the machine
 * favours neither side.
 */
async function runRound(
  bench: Bench,
  sides: Sides,
  scenarios: Scenario[],
  baselines: Baseline[],
  round: number,
  duration: number,
  openSeconds: number,
): Promise<RoundResult> {
  const result: RoundResult = { round, api: {}, baseline: {}, peer: {}, open: {} };
  const runBaseline = async (b: Baseline) => {
    if (result.baseline[b.name]) return;
    const m = await bench.load(sides.baseline, b.request, duration);
    bench.check(`round ${round} baseline ${b.name}`, m, '2xx');
    result.baseline[b.name] = m;
  };
  const runPeer = async (s: Scenario) => {
    if (!s.peer) return;
    const m = await bench.load(sides.peer, s.api, duration);
    bench.check(`round ${round} peer ${s.name}`, m, s.status);
    result.peer![s.name] = m;
  };
  const runApi = async (s: Scenario) => {
    const m = await bench.load(sides.api, s.api, duration, bench.connectionsOf(s));
    // Another status fails the scenario (results.ts unjudgeable): noted, and left unjudged.
    bench.check(`round ${round} ${s.name}`, m, [s.status, ...(s.alsoStatuses ?? [])]);
    result.api[s.name] = m;
  };
  await runBaseline(baselines.find((b) => b.name === 'const')!);
  for (const scenario of scenarios) {
    const b = baselines.find((x) => x.name === scenario.baseline);
    if (round % 2 === 1) {
      await runApi(scenario);
      if (b) await runBaseline(b);
      await runPeer(scenario);
    } else {
      await runPeer(scenario);
      if (b) await runBaseline(b);
      await runApi(scenario);
    }
    for (const name of scenario.alsoBaselines ?? [])
      await runBaseline(baselines.find((x) => x.name === name)!);
    logScenario(result, scenario, b);
    if (b && openSeconds > 0) await runOpen(bench, sides, result, scenario, b, openSeconds);
  }
  return result;
}

/**
 * Issue #35 item 1: the API and its bare route at the same offered rate, OPEN_LOOP_SHARE of the
 * API's closed-loop req/s just measured, in the round's order; latencies from each request's
 * due time. Closed-loop p99s at 50 connections are the inverse of throughput (Little's law);
 * these compare what the stack adds to a request's time when neither side is saturated.
 */
async function runOpen(
  bench: Bench,
  sides: Sides,
  result: RoundResult,
  scenario: Scenario,
  baseline: Baseline,
  seconds: number,
): Promise<void> {
  const rate = Math.max(1, Math.round(result.api[scenario.name]!.rps * OPEN_LOOP_SHARE));
  // Both sides must be able to carry the rate: the polling client's 304s outrun the bare feed
  // route (a 200), which at that rate would only queue.
  const bareRps = result.baseline[baseline.name]?.rps ?? 0;
  if (rate > bareRps * OPEN_LOOP_SHARE) {
    log(
      `round ${result.round} ${scenario.name}: no open loop, ${rate} req/s is beyond 70% of its bare route's ${bareRps.toFixed(0)}`,
    );
    return;
  }
  const connections = bench.connections;
  const one = async (server: Server, request: ArrivalStep, status: number | '2xx') => {
    // The closed-loop runs just before vacuumed (1-2 s a time); a checkpoint is enough here.
    const { result: r, serverCpu } = await bench.arrivals(
      server,
      { steps: [request], connections, duration: seconds, rate },
      'checkpoint',
    );
    const m = openMeasured(r, serverCpu);
    const unexpected = Object.keys(m.statusCodes).filter((code) =>
      status === '2xx' ? !code.startsWith('2') : Number(code) !== status,
    );
    if (m.errors > 0 || unexpected.length > 0 || r.requests === 0)
      bench.note(
        `round ${result.round} open loop ${server.name} ${scenario.name}: ${r.requests} answers, ${m.errors} errors, statuses ${JSON.stringify(m.statusCodes)}`,
      );
    return m;
  };
  const sidesInOrder = async () => {
    if (result.round % 2 === 1) {
      const api = await one(sides.api, scenario.api, scenario.status);
      return { api, bare: await one(sides.baseline, baseline.request, '2xx') };
    }
    const bare = await one(sides.baseline, baseline.request, '2xx');
    return { api: await one(sides.api, scenario.api, scenario.status), bare };
  };
  const open = await sidesInOrder();
  result.open![scenario.name] = open;
  log(
    `round ${result.round} ${scenario.name.padEnd(6)} open loop at ${rate} req/s: API p50 ${open.api.p50} p99 ${open.api.p99} p99.9 ${open.api.p999} ms` +
      ` | bare p50 ${open.bare.p50} p99 ${open.bare.p99} p99.9 ${open.bare.p999} ms | p99 ratio ${(open.api.p99 / open.bare.p99).toFixed(2)}`,
  );
}

/** One scenario's line of a round: the API, its bare route, the peer, the other comparisons. */
function logScenario(result: RoundResult, scenario: Scenario, b: Baseline | undefined): void {
  const a = result.api[scenario.name]!;
  const z = b && result.baseline[b.name]!;
  const p = result.peer![scenario.name];
  const v = scenario.versus && result.api[scenario.versus];
  log(
    `round ${result.round} ${scenario.name.padEnd(6)} API ${a.rps.toFixed(0).padStart(6)} req/s p50 ${a.p50} p99 ${a.p99} ms ` +
      `RSS ${a.rssMB?.toFixed(0)} MB` +
      (b && z
        ? ` | ${b.name} ${z.rps.toFixed(0).padStart(6)} req/s | ratio ${(a.rps / z.rps).toFixed(2)}`
        : '') +
      (p
        ? ` | peer ${p.rps.toFixed(0).padStart(6)} req/s | API/peer ${(a.rps / p.rps).toFixed(2)}`
        : '') +
      (v ? ` | vs ${scenario.versus} ${(a.rps / v.rps).toFixed(2)}` : '') +
      ` | CPU µs/req API ${a.cpuUs?.toFixed(0)}${z ? ` bare ${z.cpuUs?.toFixed(0)}` : ''}` +
      (scenario.alsoBaselines ?? [])
        .map((name) => ` | vs ${name} ${(a.rps / result.baseline[name]!.rps).toFixed(2)}`)
        .join('') +
      (Object.keys(a.statusCodes).some((c) => Number(c) !== scenario.status)
        ? ` | statuses ${JSON.stringify(a.statusCodes)}`
        : ''),
  );
}

/**
 * With --sustained S, after the rounds and on the server that ran them: a cost that grows while
 * the load lasts (the driver's queue did, bench/LOG.md) shows as a falling rate
 * within one long by-id run.
 */
async function runSustained(
  bench: Bench,
  api: Server,
  scenarios: Scenario[],
  seconds: number,
): Promise<SustainedLoad | null> {
  const get = scenarios.find((s) => s.name === 'get');
  if (seconds <= 0 || !get) return null;
  const { load, measured: m } = await bench.run(api, get.api, seconds);
  bench.check(`sustained ${get.name}`, m, get.status);
  const sustained = sustainedLoad(get.label, load.perSecond, m.rssMB);
  log(
    `sustained ${get.name} for ${sustained.seconds} s: ${sustained.firstRps.toFixed(0)} req/s in the first ` +
      `${sustained.windowS} s, ${sustained.lastRps.toFixed(0)} in the last (${sustained.ratio.toFixed(2)})`,
  );
  return sustained;
}

/**
 * Issue #35 item 4: the mix on the seller who has nothing (every create a 201), then straight
 * after the same sequence again (its keys replayed: 200s, then 201s past the first half's
 * count), each half `options.mixed` seconds at `connections` clients, closed loop as wrk runs.
 */
async function runMixed(
  bench: Bench,
  api: Server,
  databaseUrl: string,
  fixtures: Fixtures,
  options: BenchOptions,
): Promise<MixedLoad | null> {
  if (options.mixed <= 0 || (options.only && !options.only.includes('mixed'))) return null;
  const steps = mixedSteps(fixtures.mixed.sandboxKey);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const mixed: MixedLoad = { connections: options.connections, halves: [] };
  try {
    for (const name of ['creates on a seller with nothing', 'the same again: every key replayed']) {
      const first = mixed.halves.length === 0;
      log(`mixed load: ${name}, ${options.mixed} s`);
      const run = await bench.arrivals(
        api,
        { steps, connections: options.connections, duration: options.mixed, warmup: 0 },
        first ? 'vacuum' : 'none',
      );
      const r = run.result;
      const [count] = await sql<{ n: number }[]>`
        select count(*)::int as n from listings where seller_id = ${fixtures.mixed.sellerId}`;
      const unexpected = Object.keys(r.statusCodes).filter(
        (c) => !['200', '201', '404'].includes(c),
      );
      if (r.errors > 0 || unexpected.length > 0)
        bench.note(
          `mixed load, ${name}: ${r.errors} errors, statuses ${JSON.stringify(r.statusCodes)}`,
        );
      mixed.halves.push({
        name,
        result: r,
        serverCpuUs: r.requests ? (run.serverCpu * 1e6) / r.requests : null,
        postgresCpuUs: r.requests ? (run.postgresCpu * 1e6) / r.requests : null,
        listings: count?.n ?? 0,
      });
      log(
        `mixed load, ${name}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} p99 ${r.p99} p99.9 ${r.p999} max ${r.max} ms; ` +
          `window p99s ${r.windows.map((w) => w.p99.toFixed(0)).join(' ')}; by kind ${JSON.stringify(r.byStep)}; ` +
          `statuses ${JSON.stringify(r.statusCodes)}`,
      );
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  return mixed;
}

/** Issue #30: searches one at a time on the idle server, and their plans. */
async function probeSearches(
  bench: Bench,
  api: Server,
  databaseUrl: string,
  fixtures: Fixtures,
  scenarios: Scenario[],
): Promise<SearchProbe | null> {
  if (!scenarios.some((s) => s.name.startsWith('search-'))) return null;
  await bench.settle(databaseUrl);
  const search = await probeSearch(api.origin, databaseUrl, fixtures);
  log(
    `searches, idle, one connection: p50 ${search.idle.p50Ms.toFixed(1)} ms, max ${search.idle.maxMs.toFixed(1)} ms ` +
      `(${search.idle.slowest[0]?.query}); ${search.plans.length} plans explained`,
  );
  return search;
}

/** The results file's content: the run's description, its figures, and the targets judged. */
async function collectResults(
  options: BenchOptions,
  run: Pick<
    BenchResults,
    | 'scenarios'
    | 'baselines'
    | 'startup'
    | 'sustained'
    | 'mixed'
    | 'search'
    | 'worst'
    | 'neighbours'
    | 'staleStats'
    | 'rounds'
    | 'warnings'
  > & { loadAverageStart: number[]; fixtures: Fixtures; seedMs: number; reused: boolean },
): Promise<BenchResults> {
  const { loadAverageStart, fixtures, seedMs, reused, ...figures } = run;
  const partial: Omit<BenchResults, 'targets'> = {
    date: new Date().toISOString(),
    command: [
      'npm run bench',
      ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : []),
    ].join(' '),
    quick: options.quick,
    machine: {
      cpu: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
      cores: os.cpus().length,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      postgres: await postgresVersion(options.databaseUrl),
      loadAverageStart,
      loadAverageEnd: os.loadavg(),
    },
    settings: {
      durationS: options.duration,
      warmupS: options.warmup,
      rounds: options.rounds,
      connections: options.connections,
      logLevel: options.logLevel,
      serverFlags: options.serverFlags,
      rateLimitMax: RATE_LIMIT_MAX,
      poolSize: POOL_SIZE,
      dataset: {
        ...fixtures.counts,
        seedSeconds: Math.round((seedMs / 1000) * 10) / 10,
        seedMs: Math.round(seedMs),
        databaseBytes: fixtures.databaseBytes,
        ...(reused ? { reused } : {}),
      },
    },
    scenarios: figures.scenarios,
    baselines: figures.baselines,
    startup: figures.startup,
    sustained: figures.sustained,
    mixed: figures.mixed,
    search: figures.search,
    ...(figures.worst ? { worst: figures.worst } : {}),
    ...(figures.neighbours ? { neighbours: figures.neighbours } : {}),
    ...(figures.staleStats ? { staleStats: figures.staleStats } : {}),
    rounds: figures.rounds,
    warnings: figures.warnings,
  };
  return { ...partial, targets: evaluateTargets(partial) };
}

/** The results file (--out), and with --update-readme the page's block and chart; its path. */
function writeResults(results: BenchResults, options: BenchOptions): string {
  const out = path.resolve(root, options.out);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  // Issue #42's runs have a block of their own (section "Worst cases"); not from a smoke run.
  const extras = results.worst || results.neighbours || results.staleStats;
  if (extras && !options.quick && process.env.BENCH_UPDATE_README !== '0')
    writeWorstReport(results, path.join(root, RESULTS_DOC));
  if (options.updateReadme) {
    // A full run is also kept in bench/results/runs/ (the newest three): the targets are judged
    // on the medians of the runs in a row (issue #35).
    const runs = path.join(path.dirname(out), 'runs');
    mkdirSync(runs, { recursive: true });
    keepRun(results, runs);
    writeReport(results, {
      readme: path.join(root, RESULTS_DOC),
      summary: path.join(root, SUMMARY_DOC),
      chart: path.join(path.dirname(out), 'ratios.svg'),
      runs: readRuns(runs),
    });
  }
  return out;
}

function printResults(results: BenchResults): void {
  process.stdout.write(`\n${describeRun(results)}\n\n${markdownTables(results)}\n\n`);
  const startup = results.startup;
  if (startup) {
    process.stdout.write(
      `First response after start (median of ${startup.postgresMs.length}): PostgreSQL ${median(startup.postgresMs).toFixed(0)} ms; ` +
        `embedded, existing directory ${median(startup.pgliteExistingMs).toFixed(0)} ms (peak RSS ${startup.pgliteExistingRssMB?.toFixed(0)} MB); ` +
        `embedded, first-ever start on an empty directory ${median(startup.pgliteEmptyMs).toFixed(0)} ms (peak RSS ${startup.pgliteEmptyRssMB?.toFixed(0)} MB).\n`,
    );
  }
}

/** `npm run bench:webhooks` (--quick with a quick run) on the same PostgreSQL server. */
function runWebhookBench(options: BenchOptions): void {
  execFileSync(
    process.execPath,
    [...TSX, path.join(root, 'bench/src/webhooks.ts'), ...(options.quick ? ['--quick'] : [])],
    {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, BENCH_DATABASE_URL: options.databaseUrl },
    },
  );
}

/** The last line, and the exit code: 1 when a run saw errors or unexpected statuses. */
function finish(results: BenchResults, out: string, began: number): number {
  const met = results.targets.filter((t) => t.met === true).length;
  const judged = results.targets.filter((t) => t.met !== null).length;
  process.stdout.write(
    `Targets met: ${met} of ${judged}. Results: ${path.relative(root, out)}. Took ${((performance.now() - began) / 1000).toFixed(0)} s.\n`,
  );
  if (results.warnings.length > 0) {
    process.stderr.write(
      `The figures are not trustworthy: ${results.warnings.length} run(s) saw errors or unexpected statuses (see warnings in the results).\n`,
    );
    return 1;
  }
  return 0;
}

runMain('bench', main);
