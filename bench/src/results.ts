/**
 * The results file's shape, the medians and ratios computed from the rounds, and the markdown
 * table (printed by the benchmark, and written into bench/RESULTS.md by report.ts); the
 * targets are in targets.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ArrivalResult } from './arrivals.ts';
import type { LoadResult } from './load.ts';
import type { BaselineName, ScenarioName } from './scenarios.ts';

export interface Measured {
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  /** Peak RSS of the server process during the run, in MB (1 MB = 2^20 bytes). */
  rssMB: number | null;
  requests: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  /**
   * CPU time (user + system) per answered request, in microseconds: of the server process, and
   * of all PostgreSQL processes, over the run (Linux /proc, 10 ms ticks). Unlike req/s, which
   * moves with whatever else the machine runs, this is what a request costs; absent in older
   * files.
   */
  cpuUs?: number | null;
  postgresCpuUs?: number | null;
}

export interface RoundResult {
  round: number;
  api: Record<string, Measured>;
  baseline: Record<string, Measured>;
  /** The Express peer (peer-server.ts), for the scenarios it serves; absent in older files. */
  peer?: Record<string, Measured>;
  /**
   * Issue #35: per scenario with a bare route, the API and that route at the same offered rate
   * (OPEN_LOOP_SHARE of the API's closed-loop req/s in this round); absent in older files.
   */
  open?: Record<string, { api: OpenMeasured; bare: OpenMeasured }>;
}

/** An open-loop run (arrivals.ts): latencies from each request's due time, in ms. */
export interface OpenMeasured {
  rate: number;
  rps: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  /** Unanswered 2 s after the run, or failed: the rate was more than the server could take. */
  late: number;
  errors: number;
  statusCodes: Record<string, number>;
  cpuUs: number | null;
}

/** The open loop's offered rate: this share of the API's closed-loop req/s in the same round. */
export const OPEN_LOOP_SHARE = 0.7;

export function openMeasured(result: ArrivalResult, serverCpuSeconds: number): OpenMeasured {
  return {
    rate: result.rate ?? 0,
    rps: result.rps,
    p50: result.p50,
    p99: result.p99,
    p999: result.p999,
    max: result.max,
    late: result.late,
    errors: result.errors,
    statusCodes: result.statusCodes,
    cpuUs: result.requests ? (serverCpuSeconds * 1e6) / result.requests : null,
  };
}

/**
 * Issue #35 item 4: an operator's mix (1/5 feed pages, 1/5 by-id misses, 3/5 creates each with
 * a new Idempotency-Key) on one sandbox key and a seller with nothing, closed loop, then the
 * same again, which replays every key of the first half.
 */
export interface MixedLoad {
  connections: number;
  halves: {
    name: string;
    result: ArrivalResult;
    serverCpuUs: number | null;
    postgresCpuUs: number | null;
    /** Listings of the mixed seller at the end of the half. */
    listings: number;
  }[];
}

export interface StartupResult {
  /** Milliseconds from spawn to the first answered GET /api/v1/health?db=1. */
  postgresMs: number[];
  pgliteExistingMs: number[];
  pgliteEmptyMs: number[];
  /** Peak RSS during the embedded database's first-ever start, MB. */
  pgliteEmptyRssMB: number | null;
  pgliteExistingRssMB: number | null;
}

export interface ScenarioSummary {
  name: ScenarioName;
  label: string;
  /**
   * Issue #57 item 3: its runs that could not be judged (unjudgeable), left out of every figure
   * below; a scenario with any is failed, whatever the others say.
   */
  failed?: string[];
  /**
   * The overload scenario (Scenario.shedOf): 200s a second (goodput), 503s a second and their
   * share of the answers, and the server CPU of one 503 (µs; null: not measurable), medians.
   */
  overload?: {
    of: ScenarioName;
    goodput: number;
    shedPerS: number;
    shedShare: number;
    shedCpuUs: number | null;
  };
  /** Absent for a scenario with no bare route (the searches): its ratio and baselineRps are NaN. */
  baseline?: BaselineName;
  items: number;
  rps: number;
  itemsPerS: number;
  p50: number;
  p99: number;
  rssMB: number | null;
  baselineRps: number;
  /** Median over rounds of (API req/s / baseline req/s) within the same round. */
  ratio: number;
  /** Median over rounds of (API req/s / constant route req/s). */
  ofCeiling: number;
  /** The Express peer's median req/s, and the median over rounds of API / peer; null: not run. */
  peerRps?: number | null;
  peerRatio?: number | null;
  /**
   * For a scenario compared with another of the same round (Scenario.versus): that scenario's
   * median req/s and the median over rounds of this req/s / that req/s; null: it did not run.
   */
  versus?: { name: ScenarioName; label: string; rps: number; ratio: number } | null;
  /**
   * Median over rounds of this scenario's p99 / its bare route's p99 in the same round (issue
   * #18: <= 1.5).
   */
  p99Ratio?: number;
  /**
   * Medians of CPU microseconds per request (Measured.cpuUs): the API server, the bare server,
   * the peer, and PostgreSQL during the API's run and during the bare route's; null: not
   * measured.
   */
  cpu?: {
    api: number | null;
    bare: number | null;
    peer: number | null;
    postgresApi: number | null;
    postgresBare: number | null;
  };
  /** Further bare routes (Scenario.alsoBaselines): their median req/s and this req/s / theirs. */
  also?: { name: BaselineName; label: string; rps: number; ratio: number }[];
  /**
   * The open loop (RoundResult.open): medians over rounds of the offered rate and each side's
   * latencies, and of the API's p99 / the bare route's within a round; absent: not run.
   */
  open?: {
    rate: number;
    api: { p50: number; p99: number; p999: number; late: number };
    bare: { p50: number; p99: number; p999: number; late: number };
    p99Ratio: number;
  };
}

export interface TargetResult {
  name: string;
  target: string;
  value: string;
  met: boolean | null;
  /** The value judged and the goal's bound (absent when reported, not judged). */
  measured?: number;
  bound?: { min: number } | { max: number };
}

export interface BenchResults {
  date: string;
  command: string;
  quick: boolean;
  machine: {
    cpu: string;
    cores: number;
    memoryGiB: number;
    os: string;
    node: string;
    postgres: string;
    loadAverageStart: number[];
    loadAverageEnd: number[];
  };
  settings: {
    durationS: number;
    warmupS: number;
    rounds: number;
    connections: number;
    logLevel: string;
    /** Extra node flags of the API server (--server-flags), if any. */
    serverFlags?: string[];
    rateLimitMax: number;
    poolSize: number;
    dataset: {
      users: number;
      live: number;
      sandbox: number;
      /** Sandbox listings of the crowded seller (replay-crowded); absent in older files. */
      crowded?: number;
      total: number;
      seedSeconds: number;
      /** Seeding time (migration, developers, bulk rows, VACUUM ANALYZE); absent in older files. */
      seedMs?: number;
      /** pg_database_size once seeded; absent in older files. */
      databaseBytes?: number;
      /** A kept database seeded by an earlier run (--reuse): seedMs is that seed's. */
      reused?: boolean;
    };
  };
  scenarios: ScenarioSummary[];
  baselines: {
    name: BaselineName;
    label: string;
    rps: number;
    p50: number;
    p99: number;
    rssMB: number | null;
  }[];
  startup: StartupResult | null;
  /** One long by-id run after the rounds (--sustained S); null without, absent in older files. */
  sustained?: SustainedLoad | null;
  targets: TargetResult[];
  rounds: RoundResult[];
  /** Problems that make figures doubtful (errors, unexpected statuses). */
  warnings: string[];
  /** Idle latency and plans of searches (search-probe.ts); absent without search scenarios. */
  search?: SearchProbe | null;
  /** The two-minute mixed load (--mixed S); null without, absent in older files. */
  mixed?: MixedLoad | null;
  /** Issue #42 item 6 (--only worst): the worst-case searches against the feed page. */
  worst?: WorstCaseResults | null;
  /** Issue #42 item 6 (--only neighbours): a feed reader beside searching client addresses. */
  neighbours?: NeighbourResults | null;
  /** Issue #42 item 6 (--only stale-stats): the mixed load without and with an ANALYZE. */
  staleStats?: StaleStatsResults | null;
}

/** One request of GET /listings measured idle, one at a time, then in a closed loop. */
export interface WorstCaseRun {
  name: string;
  label: string;
  kind: 'feed' | 'no-match' | 'one-seller' | 'stale-etag';
  /** Sequential requests on one keep-alive connection, after one unmeasured; ms. */
  idle: {
    requests: number;
    p50: number;
    p99: number;
    max: number;
    statuses: Record<string, number>;
  };
  /** `connections` clients for `durationS` (autocannon); a 503 or 429 is not a page served. */
  load: {
    requests: number;
    /** Answers a second, and 200s (pages) a second. */
    rps: number;
    okRps: number;
    p50: number;
    p99: number;
    errors: number;
    statusCodes: Record<string, number>;
    durationS: number;
    /** CPU µs of the API server and of PostgreSQL per page served (200); null: none. */
    cpuUs: number | null;
    postgresCpuUs: number | null;
  };
}

export interface WorstCaseResults {
  connections: number;
  /** The plain feed page, measured before, amid and after the searches. */
  feed: WorstCaseRun[];
  /** The feed page's medians over those runs: what each search is compared with. */
  reference: { okRps: number; cpuUs: number | null; postgresCpuUs: number | null; p99: number };
  searches: (WorstCaseRun & { rpsRatio: number; cpuRatio: number | null })[];
}

/** Every search against the feed page's medians (WorstCaseResults.reference). */
export function compareWithFeed(
  feed: WorstCaseRun[],
  searches: WorstCaseRun[],
  connections: number,
): WorstCaseResults {
  const cpu = (key: 'cpuUs' | 'postgresCpuUs') => {
    const values = feed.map((f) => f.load[key]).filter((v): v is number => v !== null);
    return values.length ? median(values) : null;
  };
  const reference = {
    okRps: median(feed.map((f) => f.load.okRps)),
    cpuUs: cpu('cpuUs'),
    postgresCpuUs: cpu('postgresCpuUs'),
    p99: median(feed.map((f) => f.idle.p99)),
  };
  return {
    connections,
    feed,
    reference,
    searches: searches.map((s) => ({
      ...s,
      rpsRatio: s.load.okRps / reference.okRps,
      // No page served: its CPU per page is unbounded.
      cpuRatio:
        reference.cpuUs === null
          ? null
          : s.load.cpuUs === null
            ? Infinity
            : s.load.cpuUs / reference.cpuUs,
    })),
  };
}

/** One phase of the noisy-neighbour scenario: the reader, and the searchers' answers summed. */
export interface NeighbourPhase {
  name: string;
  searchers: number;
  reader: ArrivalResult;
  searches: SearcherTotals | null;
}

export interface SearcherTotals {
  requests: number;
  statusCodes: Record<string, number>;
  /** Failed requests (no answer) and requests unanswered 2 s after the end. */
  errors: number;
  late: number;
  /** The median of the searchers' p50s, and the highest of their p99s, ms. */
  p50: number;
  p99: number;
}

export interface NeighbourResults {
  seconds: number;
  readerPerSecond: number;
  searchesPerMinute: number;
  rateLimitPerMinute: number;
  phases: NeighbourPhase[];
}

/** The searchers' results of one phase summed. */
export function searcherTotals(results: ArrivalResult[]): SearcherTotals {
  const statusCodes: Record<string, number> = {};
  for (const r of results)
    for (const [code, n] of Object.entries(r.statusCodes))
      statusCodes[code] = (statusCodes[code] ?? 0) + n;
  return {
    requests: results.reduce((a, r) => a + r.requests, 0),
    statusCodes,
    errors: results.reduce((a, r) => a + r.errors, 0),
    late: results.reduce((a, r) => a + r.late, 0),
    p50: median(results.map((r) => r.p50)),
    p99: Math.max(0, ...results.map((r) => r.p99)),
  };
}

/** Answers of a status (or anything not a status, 'other') as a share of all requests sent. */
export function statusShare(
  totals: { requests: number; statusCodes: Record<string, number>; late?: number },
  status: string,
): number {
  const sent = totals.requests + (totals.late ?? 0);
  if (sent === 0) return NaN;
  return (totals.statusCodes[status] ?? 0) / sent;
}

/** A reader's answers that were not 200: other statuses, failures, and unanswered ones. */
export function nonOk(result: Pick<ArrivalResult, 'statusCodes' | 'errors' | 'late'>): number {
  const other = Object.entries(result.statusCodes)
    .filter(([code]) => code !== '200')
    .reduce((a, [, n]) => a + n, 0);
  return other + result.errors + result.late;
}

/** One mixed-load run of the stale-statistics scenario, and what the planner knew. */
export interface StaleStatsRun {
  result: ArrivalResult;
  serverCpuUs: number | null;
  postgresCpuUs: number | null;
  /** The seller's listings when the run started, and the planner's estimate of them then. */
  sellerListings: number;
  plannerEstimate: number | null;
  /** listings rows changed since its last ANALYZE when the run started (pg_stat_user_tables). */
  modifiedSinceAnalyze: number | null;
}

export interface StaleStatsResults {
  connections: number;
  seconds: number;
  /** Whether the seed ended with an ANALYZE (--skip-seed-analyze: no). */
  seedAnalyzed: boolean;
  variants: { name: 'stale' | 'analyzed'; seller: string; runs: StaleStatsRun[] }[];
  /** The second run's req/s without an ANALYZE between / with one. */
  ratio: number;
}

/** EXPLAIN (ANALYZE, BUFFERS) of one search's first page (search-probe.ts). */
export interface SearchPlan {
  /** The scenario it is the statement of, or which word. */
  name: string;
  sort: string;
  filters: string;
  /** Rows the page returned (limit + 1 when more follow). */
  rows: number;
  /** Rows of listings the plan fetched, kept or filtered out, over all its scans. */
  rowsRead: number;
  /** Shared buffers hit or read. */
  buffers: number;
  executionMs: number;
  scans: string;
}

export interface SearchProbe {
  /** Live active listings matching the scenarios' words, counted after seeding. */
  matches: { word: string; listings: number }[];
  /** The bench seller's drafts (the owner view's). */
  ownDrafts: number;
  /** Searches from the seed vocabulary, one at a time on one connection, idle server. */
  idle: {
    queries: number;
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
    slowest: { ms: number; query: string }[];
    statuses: Record<string, number>;
  };
  plans: SearchPlan[];
}

/**
 * A cost that grows with time under load (the driver's queue did: bench/LOG.md)
 * shows as fewer answers a second at the end of a long run than at its start.
 */
export interface SustainedLoad {
  label: string;
  seconds: number;
  /** Answers in each second of the run. */
  perSecond: number[];
  /** Seconds in each window: SUSTAINED_WINDOW_S, or half of a shorter run. */
  windowS: number;
  /** Mean answers a second over the first and the last window. */
  firstRps: number;
  lastRps: number;
  ratio: number;
  rssMB: number | null;
}

const SUSTAINED_WINDOW_S = 5;

export function sustainedLoad(
  label: string,
  perSecond: number[],
  rssMB: number | null,
): SustainedLoad {
  const window = Math.min(SUSTAINED_WINDOW_S, Math.floor(perSecond.length / 2));
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const firstRps = window ? mean(perSecond.slice(0, window)) : NaN;
  const lastRps = window ? mean(perSecond.slice(-window)) : NaN;
  return {
    label,
    seconds: perSecond.length,
    perSecond,
    windowS: window,
    firstRps,
    lastRps,
    ratio: lastRps / firstRps,
    rssMB,
  };
}

export function median(values: number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function measured(
  load: LoadResult,
  rssBytes: number | null,
  cpuSeconds?: { server: number; postgres: number },
): Measured {
  const perRequest = (seconds: number | undefined) =>
    seconds === undefined || load.requests === 0 ? null : (seconds * 1e6) / load.requests;
  return {
    cpuUs: perRequest(cpuSeconds?.server),
    postgresCpuUs: perRequest(cpuSeconds?.postgres),
    rps: load.rps,
    p50: load.p50,
    p90: load.p90,
    p99: load.p99,
    rssMB: rssBytes === null ? null : rssBytes / 2 ** 20,
    requests: load.requests,
    non2xx: load.non2xx,
    errors: load.errors,
    statusCodes: load.statusCodes,
  };
}

export const fmt = (n: number | null, digits = 0) =>
  n === null || !Number.isFinite(n) ? 'n/a' : n.toFixed(digits);
export const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(0)} ms` : 'n/a');
/** Bytes as pg_size_pretty writes them (1 MB = 2^20 bytes), one decimal from GB up. */
export function prettyBytes(bytes: number): string {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit >= 3 ? 1 : 0)} ${units[unit]}`;
}

/**
 * Issue #57 item 3: why a run of the API cannot be judged, or null when it can. A run is judged
 * on answers of the statuses its scenario expects only, so an error, no answer at all or a single
 * answer of another status fails it: a search run that the gate answered with 503s would
 * otherwise report the req/s of its refusals as the search's.
 */
export function unjudgeable(
  m: Pick<Measured, 'requests' | 'errors' | 'statusCodes'>,
  expected: readonly number[],
): string | null {
  const other = Object.entries(m.statusCodes).filter(
    ([code, n]) => n > 0 && !expected.includes(Number(code)),
  );
  if (m.requests > 0 && m.errors === 0 && other.length === 0) return null;
  return `${m.requests} answers, ${m.errors} errors, statuses ${JSON.stringify(m.statusCodes)} (expected ${expected.join(' or ')})`;
}

/** The scenario's statuses (Scenario.status and alsoStatuses); none given: any is judged. */
const expectedStatuses = (s: { status?: number; alsoStatuses?: number[] }): number[] | null =>
  s.status === undefined ? null : [s.status, ...(s.alsoStatuses ?? [])];

export function summarize(
  allRounds: RoundResult[],
  scenarios: {
    name: ScenarioName;
    label: string;
    baseline?: BaselineName | undefined;
    items: number;
    versus?: ScenarioName;
    alsoBaselines?: BaselineName[];
    status?: number;
    alsoStatuses?: number[];
    shedOf?: ScenarioName;
  }[],
  baselineLabels: { name: BaselineName; label: string }[],
): Pick<BenchResults, 'scenarios' | 'baselines'> {
  // A failed run (unjudgeable) is left out of every figure, and its scenario says why.
  const failures = new Map<string, string[]>();
  const rounds = allRounds.map((r) => {
    const api = { ...r.api };
    for (const s of scenarios) {
      const m = api[s.name];
      const expected = expectedStatuses(s);
      const why = m && expected ? unjudgeable(m, expected) : null;
      if (!why) continue;
      delete api[s.name];
      failures.set(s.name, [...(failures.get(s.name) ?? []), `round ${r.round}: ${why}`]);
    }
    return { ...r, api };
  });
  const pick = <K extends keyof Measured>(side: 'api' | 'baseline', name: string, key: K) =>
    rounds.map((r) => r[side][name]?.[key]).filter((v): v is Measured[K] => v !== undefined);
  const medianOf = (side: 'api' | 'baseline', name: string, key: 'rps' | 'p50' | 'p99') =>
    median(pick(side, name, key) as number[]);
  const rssOf = (side: 'api' | 'baseline', name: string) => {
    const values = pick(side, name, 'rssMB').filter((v): v is number => v !== null);
    return values.length ? median(values) : null;
  };
  const cpuOf = (
    side: 'api' | 'baseline' | 'peer',
    name: string,
    key: 'cpuUs' | 'postgresCpuUs',
  ) => {
    const values = rounds
      .map((r) => r[side]?.[name]?.[key])
      .filter((v): v is number => typeof v === 'number');
    return values.length ? median(values) : null;
  };
  const peerOf = (name: string) => {
    const runs = rounds.filter((r) => r.peer?.[name] && r.api[name]);
    if (runs.length === 0) return { peerRps: null, peerRatio: null };
    return {
      peerRps: median(runs.map((r) => r.peer![name]!.rps)),
      peerRatio: median(runs.map((r) => r.api[name]!.rps / r.peer![name]!.rps)),
    };
  };
  const versusOf = (name: ScenarioName, other: ScenarioName | undefined) => {
    if (other === undefined) return {};
    const runs = rounds.filter((r) => r.api[name] && r.api[other]);
    if (runs.length === 0) return { versus: null };
    return {
      versus: {
        name: other,
        label: scenarios.find((s) => s.name === other)?.label ?? other,
        rps: median(runs.map((r) => r.api[other]!.rps)),
        ratio: median(runs.map((r) => r.api[name]!.rps / r.api[other]!.rps)),
      },
    };
  };
  const summaries = scenarios
    .filter((s) => allRounds.some((r) => r.api[s.name]))
    .map((s): ScenarioSummary => {
      const rps = medianOf('api', s.name, 'rps');
      // A scenario without a bare route: '' names no baseline, so its ratios are NaN.
      const base = s.baseline ?? '';
      const failed = failures.get(s.name);
      return {
        name: s.name,
        label: s.label,
        ...(failed ? { failed } : {}),
        ...(s.shedOf ? { overload: overloadOf(rounds, s.name, s.shedOf) } : {}),
        ...(s.baseline ? { baseline: s.baseline } : {}),
        items: s.items,
        rps,
        itemsPerS: rps * s.items,
        p50: medianOf('api', s.name, 'p50'),
        p99: medianOf('api', s.name, 'p99'),
        rssMB: rssOf('api', s.name),
        baselineRps: medianOf('baseline', base, 'rps'),
        ratio: median(
          rounds.map((r) => (r.api[s.name]?.rps ?? NaN) / (r.baseline[base]?.rps ?? NaN)),
        ),
        ofCeiling: median(
          rounds.map((r) => (r.api[s.name]?.rps ?? NaN) / (r.baseline.const?.rps ?? NaN)),
        ),
        p99Ratio: median(
          rounds.map((r) => (r.api[s.name]?.p99 ?? NaN) / (r.baseline[base]?.p99 ?? NaN)),
        ),
        ...peerOf(s.name),
        ...versusOf(s.name, s.versus),
        cpu: {
          api: cpuOf('api', s.name, 'cpuUs'),
          bare: cpuOf('baseline', base, 'cpuUs'),
          peer: cpuOf('peer', s.name, 'cpuUs'),
          postgresApi: cpuOf('api', s.name, 'postgresCpuUs'),
          postgresBare: cpuOf('baseline', base, 'postgresCpuUs'),
        },
        ...openOf(rounds, s.name, base),
        ...(s.alsoBaselines?.length
          ? {
              also: s.alsoBaselines
                .filter((b) => rounds.some((r) => r.baseline[b]))
                .map((b) => ({
                  name: b,
                  label: baselineLabels.find((x) => x.name === b)?.label ?? b,
                  rps: medianOf('baseline', b, 'rps'),
                  ratio: median(
                    rounds.map((r) => (r.api[s.name]?.rps ?? NaN) / (r.baseline[b]?.rps ?? NaN)),
                  ),
                })),
            }
          : {}),
      };
    });
  const baselines = baselineLabels
    .filter((b) => rounds.some((r) => r.baseline[b.name]))
    .map((b) => ({
      name: b.name,
      label: b.label,
      rps: medianOf('baseline', b.name, 'rps'),
      p50: medianOf('baseline', b.name, 'p50'),
      p99: medianOf('baseline', b.name, 'p99'),
      rssMB: rssOf('baseline', b.name),
    }));
  return { scenarios: summaries, baselines };
}

/**
 * Issue #57 item 3, the overload scenario (Scenario.shedOf): medians over the rounds of its
 * goodput (200s a second), its refusals (503s) a second, and the CPU of one refusal: what the
 * run's server CPU holds beyond its 200s, each 200 costing what one of `of` (the same search,
 * admitted) cost in the same round. Null where a round has no refusal or no `of` run.
 */
export function overloadOf(
  rounds: RoundResult[],
  name: string,
  of: string,
): NonNullable<ScenarioSummary['overload']> {
  const figures = rounds
    .filter((r) => r.api[name])
    .map((r) => {
      const m = r.api[name]!;
      const ok = m.statusCodes['200'] ?? 0;
      const shed = m.statusCodes['503'] ?? 0;
      const seconds = m.rps > 0 ? m.requests / m.rps : NaN;
      const admitted = r.api[of]?.cpuUs;
      const cpuUs =
        m.cpuUs != null && admitted != null && shed > 0
          ? (m.cpuUs * m.requests - admitted * ok) / shed
          : NaN;
      return {
        goodput: ok / seconds,
        shedPerS: shed / seconds,
        shedShare: shed / m.requests,
        cpuUs,
      };
    });
  const of_ = (key: 'goodput' | 'shedPerS' | 'shedShare' | 'cpuUs') =>
    median(figures.map((f) => f[key]));
  const cpu = of_('cpuUs');
  return {
    of: of as ScenarioName,
    goodput: of_('goodput'),
    shedPerS: of_('shedPerS'),
    shedShare: of_('shedShare'),
    shedCpuUs: Number.isFinite(cpu) ? cpu : null,
  };
}

/** The open-loop figures of a scenario: medians over the rounds that ran it. */
function openOf(
  rounds: RoundResult[],
  name: string,
  baseline: string,
): Pick<ScenarioSummary, 'open'> {
  // A rate beyond 70% of the bare route's own closed-loop rate only queues on the bare side
  // (files written before bench.ts skipped such runs have them: the 304s against the feed).
  const runs = rounds
    .filter(
      (r) =>
        (r.open?.[name]?.bare.rate ?? Infinity) <=
        (r.baseline[baseline]?.rps ?? 0) * OPEN_LOOP_SHARE,
    )
    .map((r) => r.open?.[name])
    .filter((o) => o !== undefined);
  if (runs.length === 0) return {};
  const side = (key: 'api' | 'bare') => ({
    p50: median(runs.map((o) => o[key].p50)),
    p99: median(runs.map((o) => o[key].p99)),
    p999: median(runs.map((o) => o[key].p999)),
    late: median(runs.map((o) => o[key].late)),
  });
  return {
    open: {
      rate: median(runs.map((o) => o.api.rate)),
      api: side('api'),
      bare: side('bare'),
      p99Ratio: median(runs.map((o) => o.api.p99 / o.bare.p99)),
    },
  };
}

/** The open loop's table: each scenario and its bare route at the same offered rate. */
function openTable(scenarios: ScenarioSummary[]): string[] {
  const open = scenarios.filter((s) => s.open && s.open.rate <= s.baselineRps * OPEN_LOOP_SHARE);
  if (open.length === 0) return [];
  const lat = (o: { p50: number; p99: number; p999: number; late: number }) =>
    `${fmt(o.p50, 1)} / ${fmt(o.p99, 1)} / ${fmt(o.p999, 1)}${o.late ? ` (${fmt(o.late)} late)` : ''}`;
  return [
    '',
    `| Open loop, same offered rate (${OPEN_LOOP_SHARE * 100}% of the API's closed-loop req/s) | offered req/s | API p50 / p99 / p99.9 (ms) | bare p50 / p99 / p99.9 (ms) | p99 API / bare |`,
    '| --- | ---: | ---: | ---: | ---: |',
    ...open.map(
      (s) =>
        `| ${s.label} | ${fmt(s.open!.rate)} | ${lat(s.open!.api)} | ${lat(s.open!.bare)} | ${fmt(s.open!.p99Ratio, 2)} |`,
    ),
  ];
}

/** The mixed load's table: each half's rate and tail, and its worst 5-second window. */
function mixedTable(mixed: MixedLoad): string[] {
  return [
    '',
    `| Mixed load, ${mixed.connections} connections, closed loop (1/5 feed, 1/5 by-id misses, 3/5 creates with a new Idempotency-Key) | seconds | req/s | p50 | p99 | p99.9 | max | worst 5 s window's p99 | p50 / p99 by kind | statuses | CPU µs/req API / PostgreSQL | seller's listings after |`,
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |',
    ...mixed.halves.map((h) => {
      const r = h.result;
      const worst = Math.max(...r.windows.filter((w) => w.requests > 0).map((w) => w.p99));
      const statuses = Object.entries(r.statusCodes)
        .map(([code, n]) => `${code}: ${n.toLocaleString('en')}`)
        .join(', ');
      const kinds = Object.entries(r.byStep ?? {})
        .map(([kind, k]) => `${kind} ${fmt(k.p50)} / ${fmt(k.p99)} ms`)
        .join(', ');
      return (
        `| ${h.name} | ${r.durationS} | ${fmt(r.rps)} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.p999)} | ${ms(r.max)} | ${ms(worst)} | ${kinds} | ` +
        `${statuses}${r.errors ? `, errors: ${r.errors}` : ''} | ${fmt(h.serverCpuUs)} / ${fmt(h.postgresCpuUs)} | ${h.listings.toLocaleString('en')} |`
      );
    }),
  ];
}

/** The statement's rows: limit 24, plus one to know whether more follow. */
export const PAGE_ROWS = 25;

/** The search probe's tables: the words' selectivity, idle latency, the plans. */
function searchTables(probe: SearchProbe, live: number): string[] {
  const share = (n: number) => `${((100 * n) / live).toFixed(n * 1000 < live ? 3 : 1)}%`;
  const lines = [
    '',
    `Search words: ${probe.matches.map((m) => `"${m.word}" in ${m.listings.toLocaleString('en')} live listings (${share(m.listings)})`).join(', ')}; the bench seller has ${probe.ownDrafts} drafts.`,
    '',
    `Idle, one connection, ${probe.idle.queries} searches from the seed vocabulary: p50 ${fmt(probe.idle.p50Ms, 1)} ms, p99 ${fmt(probe.idle.p99Ms, 1)} ms, ` +
      `max ${fmt(probe.idle.maxMs, 1)} ms; statuses ${JSON.stringify(probe.idle.statuses)}; slowest: ` +
      probe.idle.slowest.map((x) => `\`${x.query}\` ${fmt(x.ms)} ms`).join(', ') +
      '.',
    '',
    '| Search page (EXPLAIN ANALYZE, limit 24) | sort | rows | listings rows read | per page row | buffers | ms | scans |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const p of probe.plans) {
    lines.push(
      `| ${p.name}: ${p.filters} | ${p.sort} | ${p.rows} | ${p.rowsRead} | ${fmt(p.rowsRead / PAGE_ROWS, 1)} | ${p.buffers} | ${fmt(p.executionMs, 1)} | ${p.scans} |`,
    );
  }
  return lines;
}

const mark = (met: boolean | null) => (met === null ? '-' : met ? 'yes' : '**no**');

export function markdownTables(results: BenchResults): string {
  const lines: string[] = [];
  lines.push(
    '| Scenario | req/s | items/s | p50 | p99 | peak RSS | bare baseline req/s | ratio to baseline | share of constant route | Express peer req/s | API / peer |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const s of results.scenarios) {
    const baseline = results.baselines.find((b) => b.name === s.baseline);
    const peer = s.peerRps == null ? ' | ' : `${fmt(s.peerRps)} | **${fmt(s.peerRatio!, 2)}**`;
    // A scenario compared with another of the same round: that ratio beside the bare one.
    const versus = s.versus
      ? `; vs ${s.versus.name} (${fmt(s.versus.rps)} req/s): **${fmt(s.versus.ratio, 2)}**`
      : s.versus === null
        ? '; vs its other scenario: not run'
        : '';
    const also = (s.also ?? [])
      .map((a) => `; vs ${a.label} (${fmt(a.rps)} req/s): ${fmt(a.ratio, 2)}`)
      .join('');
    // No bare route (the searches): the comparison is the other scenario of the same round.
    const bare = s.baseline
      ? `${fmt(s.baselineRps)} (${baseline?.label ?? s.baseline}) | **${fmt(s.ratio, 2)}**${versus}`
      : `- | ${versus.replace(/^; /, '')}`;
    lines.push(
      `| ${s.label}${s.failed ? ' (**failed**, not judged: a run had another status)' : ''} | ${fmt(s.rps)} | ${s.items > 1 ? fmt(s.itemsPerS) : ''} | ${ms(s.p50)} | ${ms(s.p99)} | ${fmt(s.rssMB)} MB | ` +
        `${bare}${also} | ${fmt(s.ofCeiling, 2)} | ${peer} |`,
    );
  }
  const ceiling = results.baselines.find((b) => b.name === 'const');
  if (ceiling) {
    lines.push(
      `| _${ceiling.label}_ | ${fmt(ceiling.rps)} |  | ${ms(ceiling.p50)} | ${ms(ceiling.p99)} | ${fmt(ceiling.rssMB)} MB |  | _ceiling_ | 1.00 |  |  |`,
    );
  }
  const costed = results.scenarios.filter((s) => s.cpu && s.cpu.api !== null);
  if (costed.length) {
    lines.push(
      '',
      '| CPU per request (µs) | API server | bare server | API / bare | Express peer | PostgreSQL, API run | PostgreSQL, bare run |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const s of costed) {
      const c = s.cpu!;
      const over = c.api !== null && c.bare ? fmt(c.api / c.bare, 2) : 'n/a';
      lines.push(
        `| ${s.label} | ${fmt(c.api)} | ${fmt(c.bare)} | ${over} | ${fmt(c.peer)} | ${fmt(c.postgresApi)} | ${fmt(c.postgresBare)} |`,
      );
    }
  }
  lines.push(...openTable(results.scenarios));
  if (results.mixed) lines.push(...mixedTable(results.mixed));
  if (results.search) lines.push(...searchTables(results.search, results.settings.dataset.live));
  lines.push('', '| Target | Goal | Measured | Met |', '| --- | --- | --- | --- |');
  for (const t of results.targets)
    lines.push(`| ${t.name} | ${t.target} | ${t.value} | ${mark(t.met)} |`);
  return lines.join('\n');
}

export function describeRun(results: BenchResults): string {
  const m = results.machine;
  const s = results.settings;
  return [
    `${results.quick ? 'QUICK RUN (harness check, not representative). ' : ''}` +
      `${results.date}, \`${results.command}\`: ${s.rounds} round(s) x ${s.durationS} s per scenario, ` +
      `${s.connections} connections, medians of the rounds.`,
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; ${m.postgres}; ` +
      `load average ${m.loadAverageStart.map((v) => v.toFixed(1)).join(' / ')} at the start, ` +
      `${m.loadAverageEnd.map((v) => v.toFixed(1)).join(' / ')} at the end.`,
    `Data: ${s.dataset.live.toLocaleString('en')} live active listings, ${s.dataset.sandbox.toLocaleString('en')} sandbox` +
      (s.dataset.crowded
        ? ` (${s.dataset.crowded.toLocaleString('en')} of them one seller's, for the crowded replay)`
        : '') +
      `, ${s.dataset.total.toLocaleString('en')} in all, ${s.dataset.users.toLocaleString('en')} users` +
      (s.dataset.seedMs === undefined
        ? ''
        : `; seeded in ${(s.dataset.seedMs / 1000).toFixed(1)} s`) +
      (s.dataset.databaseBytes === undefined
        ? ''
        : `, database ${prettyBytes(s.dataset.databaseBytes)} after seeding (pg_database_size)`) +
      '. ' +
      `Server: ${s.serverFlags?.length ? `node ${s.serverFlags.join(' ')}, ` : ''}LOG_LEVEL=${s.logLevel}, RATE_LIMIT_MAX=${s.rateLimitMax} per minute (so the limiter counts but never refuses), pool ${s.poolSize}.`,
  ].join('\n');
}

/**
 * Writes a run's results (JSON) to `out`, then prints each target judged (met or MISSED, the
 * measure, the goal) and where the results are (bench:webhooks, bench:alerts).
 */
export function writeJudged(
  out: string,
  results: { targets: readonly { target: string; goal: string; measured: string; met: boolean }[] },
  root: string,
): void {
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  for (const target of results.targets)
    process.stdout.write(
      `${target.met ? 'met    ' : 'MISSED '} ${target.target}: ${target.measured} (goal ${target.goal})\n`,
    );
  process.stdout.write(`Results: ${path.relative(root, out)}\n`);
}
