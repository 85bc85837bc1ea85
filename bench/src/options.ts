/**
 * The benchmark's knobs, from flags (`npm run bench -- --rounds 5`) or BENCH_* variables.
 * `--quick` is a smoke run of the whole pipeline (small seed, short runs): its figures prove
 * the harness works, not how fast the API is.
 */
import { REPLAY_KEYS } from './replay-keys.ts';

export interface BenchOptions {
  /** PostgreSQL server to create the benchmark's own database on (never the one in use). */
  databaseUrl: string;
  /** Seconds each measured autocannon run lasts. */
  duration: number;
  /** Seconds of unmeasured load per scenario before the first round (JIT, caches, pool). */
  warmup: number;
  rounds: number;
  connections: number;
  /** Live, active listings in the public feed. */
  listings: number;
  sellers: number;
  /** Sandbox listings spread over the sellers (the bench key's owner gets its own on top). */
  sandboxListings: number;
  /**
   * Sandbox listings held by one more developer's seller, each with an external_id: the
   * replay-crowded scenario replays on that seller, so a cost that grows with a seller's
   * inventory shows as its ratio to the replay on the bench seller (issue #18 item 0).
   */
  crowdedListings: number;
  /** How many pages deep the deep-page scenario's cursor is. */
  deepPages: number;
  /** Times the server's first response is measured on each kind of start. */
  startupRounds: number;
  skipStartup: boolean;
  /** Leave out the webhook delivery bench that follows a whole run (bench:webhooks). */
  skipWebhooks: boolean;
  /** LOG_LEVEL of the server under test. */
  logLevel: string;
  /** Keep the bench_* database after the run (to look at it). */
  keep: boolean;
  /**
   * Results file, relative to the repository's root; the tables of bench/RESULTS.md and the
   * summary of docs/performance.md are generated from it (`npm run bench:report`).
   */
  out: string;
  /**
   * Rewrite docs/performance.md's summary, bench/RESULTS.md and the chart (ratios.svg) from the
   * results: by default after a full run (all scenarios, not --quick); BENCH_UPDATE_README=0 or
   * =1 to decide.
   */
  updateReadme: boolean;
  /** Write a V8 CPU profile of the API server (node --cpu-prof) into this directory. */
  cpuProf: string | undefined;
  /**
   * Extra node flags for the API server under load (e.g. "--max-old-space-size=192"), to try V8
   * settings.
   */
  serverFlags: string[];
  /**
   * Seconds of one by-id run after the rounds, its last seconds' rate against its first (a cost
   * that grows while the load lasts); 0 (the default) skips it.
   */
  sustained: number;
  /**
   * Seconds of each open-loop run (issue #35): after each scenario's closed-loop runs in a round,
   * the API and its bare route at the same offered rate; 0 skips them.
   */
  open: number;
  /**
   * Seconds of each half of the mixed load after the rounds (issue #35 item 4: creates on an
   * empty seller, then the same again replaying every key); 0 skips it.
   */
  mixed: number;
  /**
   * Seconds of each phase of the noisy-neighbour scenario (issue #42 item 6: a feed reader
   * alone, beside one searching client address, beside 20); 0 skips it. Run by --only only.
   */
  neighbours: number;
  /**
   * Seconds of each of the four mixed-load runs of the stale-statistics scenario (issue #42
   * item 6: twice on one seller without an ANALYZE between, twice with one); 0 skips it. Run by
   * --only only.
   */
  staleStats: number;
  /**
   * Seed once and keep the database: a database named for the seed's code and sizes is reused
   * when it exists (its fixtures kept in it), so a rerun skips the seeding; never dropped.
   */
  reuse: boolean;
  /** End the seed with VACUUM alone, no ANALYZE (the stale-statistics case from the start). */
  skipSeedAnalyze: boolean;
  /** Only these scenarios (comma-separated names), for profiling and debugging. */
  only: string[] | undefined;
  quick: boolean;
}

/**
 * Issue #42 item 6's runs, each named by --only alone (not part of a full run): the worst-case
 * searches, the noisy neighbours, the mixed load on stale statistics.
 */
export const EXTRA_RUNS = ['worst', 'neighbours', 'stale-stats'] as const;

const DEFAULTS: BenchOptions = {
  databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
  duration: 5,
  warmup: 2,
  rounds: 3,
  connections: 50,
  listings: 100_000,
  sellers: 1000,
  sandboxListings: 10_000,
  crowdedListings: 100_000,
  deepPages: 200,
  startupRounds: 3,
  skipStartup: false,
  skipWebhooks: false,
  logLevel: 'warn',
  keep: false,
  out: 'bench/results/results.json',
  updateReadme: false,
  cpuProf: undefined,
  serverFlags: [],
  sustained: 0,
  open: 5,
  mixed: 120,
  neighbours: 30,
  staleStats: 30,
  reuse: false,
  skipSeedAnalyze: false,
  only: undefined,
  quick: false,
};

const QUICK: Partial<BenchOptions> = {
  duration: 2,
  warmup: 1,
  rounds: 1,
  connections: 20,
  listings: 6000,
  sellers: 100,
  sandboxListings: 600,
  crowdedListings: 3000,
  deepPages: 200,
  startupRounds: 1,
  open: 2,
  mixed: 5,
  neighbours: 3,
  staleStats: 3,
  out: 'bench/results/results.quick.json',
};

export class UsageError extends Error {
  override name = 'UsageError';
}

const NUMERIC = new Set<keyof BenchOptions>([
  'duration',
  'warmup',
  'rounds',
  'connections',
  'listings',
  'sellers',
  'sandboxListings',
  'crowdedListings',
  'deepPages',
  'startupRounds',
  'sustained',
  'open',
  'mixed',
  'neighbours',
  'staleStats',
]);
const BOOLEAN = new Set<keyof BenchOptions>([
  'skipStartup',
  'skipWebhooks',
  'keep',
  'updateReadme',
  'reuse',
  'skipSeedAnalyze',
  'quick',
]);

const camel = (flag: string) =>
  flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()) as keyof BenchOptions;
const envName = (key: string) => `BENCH_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;

export const USAGE = `npm run bench -- [--quick] [--duration S] [--warmup S] [--rounds N] [--connections N]
  [--listings N] [--sellers N] [--sandbox-listings N] [--crowded-listings N] [--deep-pages N]
  [--startup-rounds N] [--skip-startup] [--skip-webhooks] [--sustained S] [--open S] [--mixed S]
  [--log-level L] [--only list,get,...; "search": all searches; "mixed": the mixed load;
   "worst", "neighbours", "stale-stats": issue #42's worst-case runs] [--neighbours S] [--stale-stats S]
  [--cpu-prof DIR] [--server-flags "--node-flag ..."] [--out FILE]
  [--update-readme] [--keep] [--reuse] [--skip-seed-analyze]
  [--database-url postgres://...]   (each flag also as BENCH_<NAME>, e.g. BENCH_ROUNDS=5)`;

function assign(options: BenchOptions, key: keyof BenchOptions, raw: string, source: string): void {
  if (!(key in DEFAULTS)) throw new UsageError(`unknown option ${source}\n${USAGE}`);
  if (NUMERIC.has(key)) {
    const value = Number(raw);
    const least = [
      'warmup',
      'startupRounds',
      'sustained',
      'open',
      'mixed',
      'neighbours',
      'staleStats',
    ].includes(key)
      ? 0
      : 1;
    if (!Number.isFinite(value) || value < least) {
      throw new UsageError(`${source} must be a positive number, got "${raw}"`);
    }
    (options as unknown as Record<string, number>)[key] = value;
  } else if (BOOLEAN.has(key)) {
    (options as unknown as Record<string, boolean>)[key] =
      raw === '' || raw === 'true' || raw === '1';
  } else if (key === 'only') {
    options.only = raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  } else if (key === 'serverFlags') {
    options.serverFlags = raw.split(/\s+/).filter(Boolean);
  } else {
    (options as unknown as Record<string, string>)[key] = raw;
  }
}

export function parseOptions(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
): BenchOptions {
  const quick = argv.includes('--quick') || env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  const options: BenchOptions = { ...DEFAULTS, ...(quick ? QUICK : {}), quick };
  if (env.DATABASE_URL?.startsWith('postgres')) options.databaseUrl = env.DATABASE_URL;
  for (const key of Object.keys(DEFAULTS) as (keyof BenchOptions)[]) {
    const raw = env[envName(key)];
    if (raw !== undefined && raw !== '' && key !== 'quick') assign(options, key, raw, envName(key));
  }
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--quick') continue;
    if (arg === '--help' || arg === '-h') throw new UsageError(USAGE);
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument "${arg}"\n${USAGE}`);
    const eq = arg.indexOf('=');
    const key = camel(eq === -1 ? arg.slice(2) : arg.slice(2, eq));
    if (BOOLEAN.has(key) && eq === -1) {
      assign(options, key, '', arg);
      continue;
    }
    const value = eq === -1 ? argv[(i += 1)] : arg.slice(eq + 1);
    if (value === undefined) throw new UsageError(`${arg} needs a value`);
    assign(options, key, value, arg);
  }
  // A partial run (--only) keeps the full run's results file (bench/results/results.json) as it is.
  const outGiven = argv.some((a) => a === '--out' || a.startsWith('--out=')) || !!env.BENCH_OUT;
  // Issue #42's runs alone write a file of their own, kept in the repository (the "before").
  const extrasOnly =
    options.only?.length &&
    options.only.every((n) => (EXTRA_RUNS as readonly string[]).includes(n));
  if (options.only !== undefined && !outGiven && !options.quick)
    options.out = extrasOnly ? 'bench/results/worst.json' : 'bench/results/results.only.json';
  const readme = env.BENCH_UPDATE_README;
  if (!argv.includes('--update-readme') && (readme === undefined || readme === '')) {
    options.updateReadme = !options.quick && options.only === undefined;
  }
  if (options.listings < options.deepPages * 24 + 24) {
    throw new UsageError(
      `--listings ${options.listings} is too few for a cursor ${options.deepPages} pages deep`,
    );
  }
  // The crowded seller's replay keys are some of its own listings' external_ids.
  if (options.crowdedListings < REPLAY_KEYS) {
    throw new UsageError(
      `--crowded-listings ${options.crowdedListings} is too few for ${REPLAY_KEYS} replay keys`,
    );
  }
  return options;
}
