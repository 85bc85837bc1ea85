/**
 * The targets of the performance issues (#18, and #30 for the searches) as a table: what is
 * measured, the goal, and how the value is computed from a run. The bench judges a run with it,
 * and `npm run bench:report` judges a results file again, so a change here shows without a run.
 */
import {
  fmt,
  median,
  ms,
  PAGE_ROWS,
  type BenchResults,
  type RoundResult,
  type ScenarioSummary,
  type TargetResult,
} from './results.ts';
import type { ScenarioName } from './scenarios.ts';

type Run = Omit<BenchResults, 'targets'>;

/** A goal as the table writes it, and the test of a measured value against it. */
interface Goal {
  text: string;
  /** Absent: the value is reported, not judged. */
  meets?: (value: number) => boolean;
}
const atLeast = (min: number, unit = ''): Goal => ({
  text: `>= ${min}${unit}`,
  meets: (v) => v >= min,
});
const atMost = (max: number, unit = '', text = `<= ${max}${unit}`): Goal => ({
  text,
  meets: (v) => v <= max,
});
const reported = (text: 'none' | 'report'): Goal => ({ text });

/** A measured value: `value` is judged against the goal, `shown` is what the table says. */
interface Value {
  value: number;
  shown: string;
  /** false: reported, not judged (a run smaller than the target is stated for). */
  judged?: boolean;
  /** false: the run cannot meet the target whatever the value. */
  eligible?: boolean;
}

/**
 * One row of the targets table: what is measured, the goal, and how the value is computed from
 * a run. With `each`, one row per item (the scenarios the peer serves, the searches, the sorts).
 * `compute` returning a string shows it unjudged ('not run', 'n/a'); undefined leaves the row out.
 */
interface TargetRow<T> {
  each?: (run: Run) => T[];
  measure: string | ((run: Run, item: T) => string);
  goal: Goal | ((item: T) => Goal);
  compute: (run: Run, item: T) => Value | string | undefined;
}

/** A row as a function of the run: rows over different items (or none) sit in one table. */
const row =
  <T = undefined>(target: TargetRow<T>) =>
  (run: Run): TargetResult[] =>
    (target.each ? target.each(run) : [undefined as T]).flatMap((item) => {
      const value = target.compute(run, item);
      if (value === undefined) return [];
      const goal = typeof target.goal === 'function' ? target.goal(item) : target.goal;
      const name =
        typeof target.measure === 'function' ? target.measure(run, item) : target.measure;
      if (typeof value === 'string') return [{ name, target: goal.text, value, met: null }];
      const met =
        goal.meets && value.judged !== false
          ? goal.meets(value.value) && value.eligible !== false
          : null;
      return [{ name, target: goal.text, value: value.shown, met }];
    });

const scenario = (run: Run, name: ScenarioName) => run.scenarios.find((s) => s.name === name);
/** The median over rounds of a figure taken within each round. */
const perRound = (run: Run, figure: (round: RoundResult) => number | undefined) =>
  median(run.rounds.map((r) => figure(r) ?? NaN));
const ratio = (v: number, digits = 2, unit = ''): Value => ({
  value: v,
  shown: `${v.toFixed(digits)}${unit}`,
});

/** A scenario's req/s against its bare route's in the same round (ScenarioSummary.ratio). */
const vsBare = (name: ScenarioName, min: number, bare: string) =>
  row({
    measure: (run) => `${scenario(run, name)?.label ?? name} vs ${bare}`,
    goal: atLeast(min),
    compute: (run) => {
      const s = scenario(run, name);
      return s ? ratio(s.ratio) : 'not run';
    },
  });

/** Issue #18 item 0: the crowded replay's target, and the inventory it is stated for. */
const CROWDED_MIN = 0.9;
const CROWDED_TARGET = 100_000;

/**
 * Issue #30's targets, stated for 1,000,000 listings (a smaller run is reported, not judged):
 * each search scenario at >= 0.5 of the plain feed page's req/s in the same round, the worst idle
 * latency of the vocabulary searches <= 100 ms, and the rows a page reads (EXPLAIN) per sort
 * within ROWS_PER_PAGE times the page, but relevance, which ranks a window of matches.
 */
const SEARCH_MIN = 0.5;
const SEARCH_LISTINGS = 1_000_000;
const SEARCH_IDLE_MS = 100;
const ROWS_PER_PAGE = 20;

/** Whether a run is as large as issue #30's targets ask, and what a smaller one adds to a value. */
function searchScale(run: Run): { atScale: boolean; under: string } {
  const live = run.settings.dataset?.live;
  const atScale = live !== undefined && live >= SEARCH_LISTINGS;
  const under = atScale
    ? ''
    : ` (${live?.toLocaleString('en')} listings, under ${SEARCH_LISTINGS.toLocaleString('en')}: not judged)`;
  return { atScale, under };
}

/** The targets, in the order the table lists them (issue #18's, then issue #30's searches'). */
const TARGETS = [
  vsBare('list', 0.85, 'bare SQL route'),
  vsBare('get', 0.85, 'bare SQL route'),
  vsBare('create', 0.7, 'bare INSERT route (the same statement, outbox included)'),
  vsBare('patch', 0.6, 'bare UPDATE route (the same statement, outbox included)'),
  vsBare('replay', 0.6, 'bare external_id lookup (all a no-op replay runs)'),
  // Against the Express 5 + express-openapi-validator peer, every scenario it serves.
  row<ScenarioSummary>({
    each: (run) => run.scenarios.filter((s) => s.peerRatio != null),
    measure: (_, s) => `${s.label} vs the Express peer`,
    goal: (s) => atLeast(s.name === 'get' ? 1.5 : 1.1),
    compute: (_, s) => ratio(s.peerRatio!),
  }),
  // A replay by a seller holding >= 100,000 listings against the same replay on the bench
  // seller, per round. A smaller crowded seller (--quick) is reported, not judged.
  row({
    measure: (run) =>
      `${scenario(run, 'replay-crowded')?.label ?? 'replay by a seller with >= 100,000 listings'} vs the same on the bench seller`,
    goal: atLeast(CROWDED_MIN),
    compute: (run) => {
      const crowded = scenario(run, 'replay-crowded');
      if (!crowded && !scenario(run, 'replay')) return undefined;
      const v = crowded?.versus;
      if (!v) return 'not run';
      const held = run.settings.dataset?.crowded;
      if (held === undefined || held >= CROWDED_TARGET) return ratio(v.ratio);
      return {
        value: v.ratio,
        shown: `${v.ratio.toFixed(2)} (${held.toLocaleString('en')} listings, under ${CROWDED_TARGET.toLocaleString('en')}: not judged)`,
        judged: false,
      };
    },
  }),
  // Issue #30: each search against the plain feed page of the same round.
  row<ScenarioSummary>({
    each: (run) => run.scenarios.filter((s) => s.name.startsWith('search-')),
    measure: (_, s) => `${s.label} vs the plain feed page, same round`,
    goal: atLeast(SEARCH_MIN),
    compute: (run, s) => {
      const { atScale, under } = searchScale(run);
      const v = s.versus;
      return v
        ? { ...ratio(v.ratio), shown: `${v.ratio.toFixed(2)}${under}`, judged: atScale }
        : 'not run';
    },
  }),
  row({
    measure: (run) =>
      `worst idle latency of ${run.search!.idle.queries} searches from the seed vocabulary, one connection`,
    goal: atMost(SEARCH_IDLE_MS, ' ms'),
    compute: (run) => {
      const idle = run.search?.idle;
      if (!idle) return undefined;
      const { atScale, under } = searchScale(run);
      return {
        value: idle.maxMs,
        shown: `${ms(idle.maxMs)} (p50 ${fmt(idle.p50Ms, 1)} ms, p99 ${ms(idle.p99Ms)})${under}`,
        judged: atScale,
      };
    },
  }),
  row<string>({
    each: (run) => [...new Set((run.search?.plans ?? []).map((p) => p.sort))],
    measure: (_, sort) =>
      `rows read per page (EXPLAIN), sort=${sort}, worst case${sort === 'relevance' ? ' (reported: a window of matches)' : ''}`,
    goal: (sort) =>
      sort === 'relevance'
        ? reported('report')
        : atMost(ROWS_PER_PAGE * PAGE_ROWS, '', `<= ${ROWS_PER_PAGE} x ${PAGE_ROWS}`),
    compute: (run, sort) => {
      const worst = run
        .search!.plans.filter((p) => p.sort === sort)
        .sort((a, b) => b.rowsRead - a.rowsRead)[0]!;
      return {
        value: worst.rowsRead,
        shown: `${worst.rowsRead} (${worst.name}: ${worst.filters})`,
      };
    },
  }),
  // A polling client's 304s against the 200s of the same feed page, per round.
  row({
    measure: '304 answers/s for an unchanged feed page vs 200 answers/s',
    goal: atLeast(3, 'x'),
    compute: (run) =>
      scenario(run, 'poll') && scenario(run, 'list')
        ? ratio(
            perRound(run, (r) => (r.api.poll?.rps ?? NaN) / (r.api.list?.rps ?? NaN)),
            2,
            'x',
          )
        : undefined,
  }),
  // Issue #18 withdrew the batch's 10x target (the bare 25-row statement itself reaches about
  // 7x on this machine); the ratio is still reported, with the bare routes' own.
  row({
    measure: 'batch items/s vs single POSTs/s (reported; target withdrawn by #18)',
    goal: reported('none'),
    compute: (run) => {
      const batch = scenario(run, 'batch');
      if (!batch || !scenario(run, 'create')) return undefined;
      const items = (side: 'api' | 'baseline', single: string) =>
        perRound(
          run,
          (r) => ((r[side].batch?.rps ?? NaN) * batch.items) / (r[side][single]?.rps ?? NaN),
        );
      const api = items('api', 'create');
      const floor = items('baseline', 'insert');
      const bare = Number.isNaN(floor) ? '' : ` (bare routes: ${floor.toFixed(1)}x)`;
      return { value: api, shown: `${api.toFixed(1)}x${bare}` };
    },
  }),
  // Each scenario's p99 against its bare route's p99 in the same round; the worst. The target
  // is stated at 50 connections: fewer cannot meet it.
  row({
    measure: (run) =>
      `p99 vs its bare route's p99 at ${run.settings.connections} connections (worst scenario)`,
    goal: atMost(1.5, 'x'),
    compute: (run) => {
      const worst = run.scenarios
        .filter((s) => s.p99Ratio !== undefined && Number.isFinite(s.p99Ratio))
        .sort((a, b) => b.p99Ratio! - a.p99Ratio!)[0];
      if (!worst) return 'not run';
      const bare = run.baselines.find((b) => b.name === worst.baseline)?.p99 ?? 'n/a';
      return {
        value: worst.p99Ratio!,
        shown: `${worst.p99Ratio!.toFixed(2)}x (${worst.name}: ${worst.p99} ms against ${bare} ms)`,
        eligible: run.settings.connections >= 50,
      };
    },
  }),
  // Not one of issue #18's, and only with --sustained: a look for costs that grow while the
  // load lasts (docs/performance-log.md says why it is not part of every run).
  row({
    measure: ({ sustained: s }) =>
      `sustained load: req/s in the last ${s!.windowS} s of a ${s!.seconds} s run of ${s!.label} vs its first ${s!.windowS} s`,
    goal: atLeast(0.9),
    compute: ({ sustained: s }) =>
      s
        ? {
            value: s.ratio,
            shown: `${fmt(s.ratio, 2)} (${fmt(s.firstRps)} then ${fmt(s.lastRps)} req/s)`,
          }
        : undefined,
  }),
  row({
    measure: 'server peak RSS under load',
    goal: atMost(250, ' MB'),
    compute: (run) => {
      const rss = run.scenarios.map((s) => s.rssMB).filter((v): v is number => v !== null);
      if (!rss.length) return 'n/a';
      const peak = Math.max(...rss);
      return { value: peak, shown: `${peak.toFixed(0)} MB` };
    },
  }),
  row({
    measure: 'first response after start, PostgreSQL',
    goal: atMost(1000, ' ms'),
    compute: ({ startup }) =>
      startup
        ? { value: median(startup.postgresMs), shown: ms(median(startup.postgresMs)) }
        : 'not run',
  }),
  row({
    measure: 'first response after start, existing embedded database',
    goal: atMost(3000, ' ms'),
    compute: ({ startup }) =>
      startup
        ? { value: median(startup.pgliteExistingMs), shown: ms(median(startup.pgliteExistingMs)) }
        : 'not run',
  }),
  row({
    measure: 'first-ever start, empty embedded directory (reported)',
    goal: reported('report'),
    compute: ({ startup }) =>
      startup?.pgliteEmptyMs.length
        ? {
            value: median(startup.pgliteEmptyMs),
            shown: `${ms(median(startup.pgliteEmptyMs))}, peak RSS ${fmt(startup.pgliteEmptyRssMB)} MB`,
          }
        : undefined,
  }),
];

export function evaluateTargets(results: Run): TargetResult[] {
  return TARGETS.flatMap((judge) => judge(results));
}
