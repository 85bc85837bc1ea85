/**
 * A second load generator, for what autocannon cannot measure (issue #35):
 *
 * - **open loop**: requests arrive at a fixed rate whether or not earlier ones were answered,
 *   and each latency counts from the moment its request was due, not from when a free
 *   connection sent it (wrk2's correction for coordinated omission). autocannon's
 *   `overallRate` is not that: each connection sends its share of a second back to back and
 *   then waits for the next second, so its latencies are a closed loop's in bursts.
 * - **a mix**: requests of different kinds taken in turn (a feed page, a by-id miss, creates
 *   with a new Idempotency-Key each), as an operator replays production-like traffic with wrk.
 *   Every answer's latency counts, whatever its status, and the tail is also kept per
 *   5-second window, so a stall shows when it happened.
 *
 *   node --import tsx bench/src/arrivals.ts SPEC.json      (an ArrivalSpec)
 *
 * node:http with a keep-alive agent of `connections` sockets; it prints one JSON line
 * (ArrivalResult) and exits non-zero when it cannot run.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';

/** One kind of request; its paths, bodies and header variants are taken in turn. */
export interface ArrivalStep {
  /** Steps of one name are reported together (ArrivalResult.byStep); default the method. */
  name?: string;
  method: 'GET' | 'POST' | 'PATCH';
  paths: string[];
  bodies?: string[];
  headers?: Record<string, string>;
  headerVariants?: Record<string, string>[];
  /** Each request of this step sends `Idempotency-Key: <prefix><n>`, n counting from 0. */
  idempotencyKeyPrefix?: string;
}

export interface ArrivalSpec {
  origin: string;
  /** Request kinds taken in turn: step i % steps.length. */
  steps: ArrivalStep[];
  /** Sockets (at most this many requests in flight; an open loop queues the rest). */
  connections: number;
  /** seconds */
  duration: number;
  /** Requests per second for an open loop; absent: a closed loop of `connections` clients. */
  rate?: number;
  /**
   * Seconds of the same load before the measured `duration`, not counted (sockets opened, the
   * generator's own code compiled); default 1.
   */
  warmup?: number;
  /**
   * The local address the sockets bind to (node:http `localAddress`): 127.0.0.2 and up act as
   * other client IPs against per-IP limits, the whole 127/8 answering on loopback.
   */
  localAddress?: string;
  /**
   * Epoch milliseconds to wait for before the warm-up: generators in separate processes start
   * their load together (the neighbours scenario's reader and searchers).
   */
  startAt?: number;
}

export interface ArrivalResult {
  mode: 'open' | 'closed';
  /** The offered rate (open loop), requests per second. */
  rate: number | null;
  requests: number;
  /** Answers per second over the run. */
  rps: number;
  /** Milliseconds; in an open loop counted from when each request was due. */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  errors: number;
  statusCodes: Record<string, number>;
  /** Requests sent but unanswered 2 s after the run ended (open loop; a closed one waits). */
  late: number;
  /** p99 and answers of each 5-second window, in order. */
  windows: { p99: number; requests: number }[];
  /** Each kind of request's answers and latencies (ArrivalStep.name). */
  byStep: Record<string, { requests: number; p50: number; p99: number }>;
  durationS: number;
}

const WINDOW_S = 5;

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return 0;
  // The nearest rank; the epsilon keeps 99.9% of 1,000 at rank 999 despite binary floats.
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length - 1e-9) - 1);
  return sorted[Math.max(0, index)]!;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** The steps as a stream of requests: the next one's method, path, headers and body. */
function requestStream(steps: ArrivalStep[]) {
  const turns = steps.map(() => ({ path: 0, body: 0, header: 0, key: 0 }));
  let next = 0;
  return () => {
    const index = next++ % steps.length;
    const step = steps[index]!;
    const turn = turns[index]!;
    const headers: Record<string, string> = { ...step.headers };
    const body = step.bodies?.[turn.body++ % step.bodies.length];
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (step.headerVariants)
      Object.assign(headers, step.headerVariants[turn.header++ % step.headerVariants.length]);
    if (step.idempotencyKeyPrefix)
      headers['idempotency-key'] = `${step.idempotencyKeyPrefix}${turn.key++}`;
    return {
      name: step.name ?? step.method,
      method: step.method,
      path: step.paths[turn.path++ % step.paths.length]!,
      headers,
      body,
    };
  };
}

export async function runArrivals(spec: ArrivalSpec): Promise<ArrivalResult> {
  const wait = (spec.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  return arrivals(spec);
}

function arrivals(spec: ArrivalSpec): Promise<ArrivalResult> {
  const url = new URL(spec.origin);
  const agent = new http.Agent({ keepAlive: true, maxSockets: spec.connections });
  const nextRequest = requestStream(spec.steps);
  const latencies: number[] = [];
  const windowLatencies: number[][] = [];
  const stepLatencies: Record<string, number[]> = {};
  const statusCodes: Record<string, number> = {};
  let errors = 0;
  let inFlight = 0;
  let sent = 0;
  let reported = false;
  const warmupMs = (spec.warmup ?? 1) * 1000;
  const began = performance.now();
  const started = began + warmupMs;
  const endAt = started + spec.duration * 1000;

  const send = (due: number, done: () => void) => {
    const request = nextRequest();
    inFlight += 1;
    if (due >= started) sent += 1;
    const finish = (status: string | null) => {
      inFlight -= 1;
      // Every request due within the run counts, one answered after its end too.
      if (!reported && due >= started) {
        const latency = performance.now() - due;
        latencies.push(latency);
        const window = Math.floor((due - started) / (WINDOW_S * 1000));
        (windowLatencies[window] ??= []).push(latency);
        (stepLatencies[request.name] ??= []).push(latency);
        if (status === null) errors += 1;
        else statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      }
      done();
    };
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: request.path,
        headers: request.headers,
        agent,
        timeout: 10_000,
        ...(spec.localAddress ? { localAddress: spec.localAddress } : {}),
      },
      (res) => {
        res.on('data', () => {});
        res.on('end', () => finish(String(res.statusCode)));
        res.on('error', () => finish(null));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => finish(null));
    req.end(request.body);
  };

  return new Promise((resolve) => {
    const report = () => {
      reported = true;
      agent.destroy();
      const durationS = spec.duration;
      const sorted = Float64Array.from(latencies).sort();
      const count = sorted.length;
      resolve({
        mode: spec.rate ? 'open' : 'closed',
        rate: spec.rate ?? null,
        requests: count,
        rps: count / durationS,
        p50: round(percentile(sorted, 50)),
        p90: round(percentile(sorted, 90)),
        p99: round(percentile(sorted, 99)),
        p999: round(percentile(sorted, 99.9)),
        max: round(sorted[count - 1] ?? 0),
        errors,
        statusCodes,
        late: sent - count,
        windows: Array.from({ length: Math.ceil(durationS / WINDOW_S) }, (_, i) => {
          const window = Float64Array.from(windowLatencies[i] ?? []).sort();
          return { p99: round(percentile(window, 99)), requests: window.length };
        }),
        byStep: Object.fromEntries(
          Object.entries(stepLatencies).map(([name, values]) => {
            const step = Float64Array.from(values).sort();
            const at = (p: number) => round(percentile(step, p));
            return [name, { requests: step.length, p50: at(50), p99: at(99) }];
          }),
        ),
        durationS,
      });
    };

    if (!spec.rate) {
      // Closed loop: each client sends its next request when its last one is answered.
      let clients = spec.connections;
      const loop = () => {
        if (performance.now() >= endAt) {
          if ((clients -= 1) === 0) report();
          return;
        }
        send(performance.now(), loop);
      };
      for (let i = 0; i < spec.connections; i += 1) loop();
      return;
    }

    // Open loop: request n is due at started + n / rate; a timer sends every due request (the
    // agent queues those beyond `connections` sockets; their wait counts in their latency).
    const interval = 1000 / spec.rate;
    let due = 0;
    const tick = () => {
      const now = performance.now();
      while (began + due * interval <= Math.min(now, endAt)) {
        send(began + due * interval, () => {});
        due += 1;
      }
      if (now < endAt) setTimeout(tick, 1);
      else {
        // The last requests' answers, for at most 2 s; those still missing are `late`.
        const drain = () =>
          inFlight === 0 || performance.now() > endAt + 2000 ? report() : setTimeout(drain, 5);
        drain();
      }
    };
    tick();
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const spec = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as ArrivalSpec;
  runArrivals(spec).then(
    (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
    (err: unknown) => {
      process.stderr.write(
        `arrivals failed: ${err instanceof Error ? err.message : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}
