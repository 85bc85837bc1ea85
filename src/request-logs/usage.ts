/**
 * An app's usage at a glance (docs/portal.md, usage): the request log's rollup, kept per app,
 * environment, UTC hour and outcome as batches are written (request-logs-repository.ts), and the
 * figures read from it: requests per hour or day stacked by outcome, the error rate, and p50 and
 * p95 latency estimated from fixed latency buckets.
 *
 * The estimate: a percentile's rank is found in the cumulative bucket counts and placed by linear
 * interpolation inside its bucket (as Prometheus's histogram_quantile does), so it lies in the
 * same bucket as the true value and is off by less than that bucket's width: under 3 ms up to
 * 10 ms, and above 10 ms under 56% of the true value (the widest bucket ratio, 45 -> 70 ms and
 * its multiples), usually far less. Above the last bound (10 s) the bound itself is reported.
 *
 * Long polls (isLongPoll: a GET with `wait` above 0 answered 200, such as `listen`'s
 * GET /api/v1/events?wait=25) are counted among the requests and their outcomes, but apart from
 * the latency buckets: their time is the wait asked for, not the server's speed, and it would
 * make p95 the wait.
 */
import type { Environment } from '../generated/schemas.ts';

/** Outcomes of a request, as stacked in the chart; '4xx' is every 4xx but 429. */
export const OUTCOMES = ['2xx', '3xx', '4xx', '429', '5xx'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/**
 * Upper bounds (inclusive, whole ms: latencies are logged rounded) of the latency buckets; one
 * more bucket holds what is slower than the last.
 */
export const LATENCY_BOUNDS_MS = [
  1, 2, 3, 5, 7, 10, 15, 20, 30, 45, 70, 100, 150, 200, 300, 450, 700, 1000, 1500, 2000, 3000, 4500,
  7000, 10000,
] as const;
const BUCKETS = LATENCY_BOUNDS_MS.length + 1;

export function outcomeOf(status: number): Outcome {
  if (status === 429) return '429';
  if (status >= 500) return '5xx';
  if (status >= 400) return '4xx';
  if (status >= 300) return '3xx';
  return '2xx';
}

/**
 * Whether a logged request (its method, its path with the query as logged-path.ts keeps it, and
 * its status) was a long poll: a GET whose `wait` asks for more than 0 seconds (wait=0 answers at
 * once), answered 200 (a request refused, by the rate limit or for its parameters, did not wait).
 */
export function isLongPoll(entry: { method: string; path: string; status: number }): boolean {
  if (entry.method !== 'GET' || entry.status !== 200) return false;
  const query = entry.path.indexOf('?');
  if (query === -1) return false;
  const wait = new URLSearchParams(entry.path.slice(query + 1)).get('wait');
  return wait !== null && Number(wait) > 0;
}

function bucketOf(latencyMs: number): number {
  const index = LATENCY_BOUNDS_MS.findIndex((bound) => latencyMs <= bound);
  return index === -1 ? LATENCY_BOUNDS_MS.length : index;
}

/** One row of the rollup, as a batch adds it. */
export interface UsageRow {
  app_id: string;
  environment: string;
  /** The UTC hour, ISO 8601. */
  hour: string;
  outcome: Outcome;
  /** Every request, long polls included. */
  requests: number;
  /** Of `requests`, the long polls: not in latency_buckets. */
  long_polls: number;
  /** The other requests per latency bucket. */
  latency_buckets: number[];
}

/**
 * A batch of logged requests summed per app, environment, hour and outcome, sorted by that key
 * (so that concurrent writers lock the rollup's rows in one order and never deadlock).
 */
export function rollUp(
  entries: Iterable<{
    app_id: string;
    environment: string;
    created_at: string;
    status: number;
    latency_ms: number;
    /** isLongPoll's answer; absent, not one. */
    long_poll?: boolean;
  }>,
): UsageRow[] {
  const rows = new Map<string, UsageRow>();
  for (const entry of entries) {
    const hour = `${entry.created_at.slice(0, 13)}:00:00Z`;
    const outcome = outcomeOf(entry.status);
    const key = `${entry.app_id} ${entry.environment} ${hour} ${outcome}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        app_id: entry.app_id,
        environment: entry.environment,
        hour,
        outcome,
        requests: 0,
        long_polls: 0,
        latency_buckets: new Array<number>(BUCKETS).fill(0),
      };
      rows.set(key, row);
    }
    row.requests += 1;
    if (entry.long_poll) row.long_polls += 1;
    else row.latency_buckets[bucketOf(entry.latency_ms)]! += 1;
  }
  return [...rows.keys()].sort().map((key) => rows.get(key)!);
}

/** The estimated latency at quantile `q` (0-1) of the bucket counts; null without requests. */
export function estimatePercentile(buckets: readonly number[], q: number): number | null {
  const total = buckets.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i += 1) {
    const count = buckets[i]!;
    if (count > 0 && below + count >= rank) {
      if (i >= LATENCY_BOUNDS_MS.length) return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
      const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]!;
      const upper = LATENCY_BOUNDS_MS[i]!;
      return Math.round((lower + ((upper - lower) * (rank - below)) / count) * 10) / 10;
    }
    below += count;
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]!;
}

/** One bar: an hour or a UTC day. */
export interface UsageBar {
  /** ISO 8601, the start of the hour or day (UTC). */
  start: string;
  /** Every request, long polls included. */
  requests: number;
  outcomes: Record<Outcome, number>;
  /** Of `requests`, the long polls, which the percentiles leave out. */
  long_polls: number;
  /** Of the other requests; null without any. */
  p50_ms: number | null;
  p95_ms: number | null;
}

export interface UsageReport {
  environment: Environment;
  /** Bars per hour (the last 24 hours) or per UTC day (the last `days` days, today included). */
  unit: 'hour' | 'day';
  from: string;
  to: string;
  bars: UsageBar[];
  totals: {
    requests: number;
    outcomes: Record<Outcome, number>;
    /** 4xx, 429 and 5xx. */
    errors: number;
    /** errors / requests, 0-1; null without requests. */
    error_rate: number | null;
    /** Of `requests`, the long polls, which the percentiles leave out. */
    long_polls: number;
    /** Of the requests but the long polls; null without any. */
    p50_ms: number | null;
    p95_ms: number | null;
  };
}

const noOutcomes = (): Record<Outcome, number> => ({
  '2xx': 0,
  '3xx': 0,
  '4xx': 0,
  '429': 0,
  '5xx': 0,
});

/** The period's bar starts: 24 hours up to the current one, or `days` UTC days up to today. */
export function periodOf(
  unit: 'hour' | 'day',
  count: number,
  now = new Date(),
): { starts: string[]; from: string; to: string } {
  const step = unit === 'hour' ? 3_600_000 : 86_400_000;
  const current = Math.floor(now.getTime() / step) * step;
  const starts = Array.from({ length: count }, (_, i) =>
    new Date(current - (count - 1 - i) * step).toISOString(),
  );
  return { starts, from: starts[0]!, to: new Date(current + step).toISOString() };
}

/** The rollup's rows of a period (hour, outcome, counts) as bars and totals. */
export function report(
  environment: Environment,
  unit: 'hour' | 'day',
  count: number,
  rows: readonly {
    hour: string;
    outcome: Outcome;
    requests: number;
    long_polls: number;
    latency_buckets: number[];
  }[],
  now = new Date(),
): UsageReport {
  const { starts, from, to } = periodOf(unit, count, now);
  const latencies = new Map<string, number[]>(starts.map((s) => [s, new Array(BUCKETS).fill(0)]));
  const bars = new Map<string, UsageBar>(
    starts.map((s) => [
      s,
      { start: s, requests: 0, outcomes: noOutcomes(), long_polls: 0, p50_ms: null, p95_ms: null },
    ]),
  );
  const all = new Array<number>(BUCKETS).fill(0);
  const totals = noOutcomes();
  let longPolls = 0;
  for (const row of rows) {
    const hour = new Date(row.hour);
    const start = unit === 'hour' ? hour : new Date(hour.toISOString().slice(0, 10));
    const bar = bars.get(start.toISOString());
    if (!bar) continue;
    bar.requests += row.requests;
    bar.outcomes[row.outcome] += row.requests;
    bar.long_polls += row.long_polls;
    totals[row.outcome] += row.requests;
    longPolls += row.long_polls;
    const into = latencies.get(bar.start)!;
    row.latency_buckets.forEach((n, i) => {
      into[i]! += n;
      all[i]! += n;
    });
  }
  for (const bar of bars.values()) {
    const buckets = latencies.get(bar.start)!;
    bar.p50_ms = estimatePercentile(buckets, 0.5);
    bar.p95_ms = estimatePercentile(buckets, 0.95);
  }
  const requests = OUTCOMES.reduce((sum, o) => sum + totals[o], 0);
  const errors = totals['4xx'] + totals['429'] + totals['5xx'];
  return {
    environment,
    unit,
    from,
    to,
    bars: [...bars.values()],
    totals: {
      requests,
      outcomes: totals,
      errors,
      error_rate: requests === 0 ? null : errors / requests,
      long_polls: longPolls,
      p50_ms: estimatePercentile(all, 0.5),
      p95_ms: estimatePercentile(all, 0.95),
    },
  };
}
