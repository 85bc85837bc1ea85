/**
 * The noisy neighbours of issue #42 item 6: client addresses each sending worst-case searches
 * at a fixed rate under its per-IP limit, beside a reader of the feed. Each searcher is an open
 * loop of its own (arrivals.ts) bound to its own loopback address, 127.0.0.2 and up (the whole
 * 127/8 answers on loopback, so the API counts each against its own per-IP limit); all of them
 * run in this one process, the reader in another.
 *
 *   node --import tsx bench/src/neighbours.ts SPECS.json      (an ArrivalSpec[])
 *
 * Prints one JSON line (ArrivalResult[], in the specs' order); exits non-zero when it cannot run.
 */
import { readFileSync } from 'node:fs';
import { runArrivals, type ArrivalResult, type ArrivalSpec, type ArrivalStep } from './arrivals.ts';

/** The anonymous per-IP limit the API ships with (RATE_LIMIT_MAX, per RATE_LIMIT_WINDOW_MS). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 300;
/** What each searcher sends: under its limit, as a well-behaved client would. */
export const SEARCHES_PER_MINUTE = 280;
/** The feed reader's fixed rate: 240 a minute, under the same per-IP limit as the searchers. */
export const READER_PER_SECOND = 4;

/** The n-th neighbour's loopback address, n from 0: 127.0.0.2, 127.0.0.3, ... */
export function neighbourAddress(n: number): string {
  const host = 2 + n;
  if (!Number.isInteger(n) || n < 0 || host >= 2 ** 24 - 1)
    throw new RangeError(`no loopback address for neighbour ${n}`);
  return `127.${host >> 16}.${(host >> 8) & 255}.${host & 255}`;
}

/**
 * `count` searchers, each its own address from `firstIndex` on (neighbourAddress), its own open
 * loop at `perMinute`, sending `paths` in turn from its own starting point (so they do not all
 * send the same search at once).
 */
export function searcherSpecs(options: {
  origin: string;
  count: number;
  firstIndex?: number;
  paths: string[];
  perMinute?: number;
  duration: number;
  startAt?: number;
  connections?: number;
}): ArrivalSpec[] {
  const { paths, count, firstIndex = 0 } = options;
  if (paths.length === 0) throw new Error('searchers need at least one path');
  return Array.from({ length: count }, (_, i) => {
    const offset = Math.floor((i * paths.length) / Math.max(1, count));
    const step: ArrivalStep = {
      name: 'search',
      method: 'GET',
      paths: [...paths.slice(offset), ...paths.slice(0, offset)],
    };
    return {
      origin: options.origin,
      steps: [step],
      // Room for a few searches in flight; the open loop queues the rest (their wait counts).
      connections: options.connections ?? 8,
      duration: options.duration,
      rate: (options.perMinute ?? SEARCHES_PER_MINUTE) / 60,
      localAddress: neighbourAddress(firstIndex + i),
      ...(options.startAt === undefined ? {} : { startAt: options.startAt }),
    };
  });
}

/** The feed reader: the plain feed page at READER_PER_SECOND, from 127.0.0.1. */
export function readerSpec(options: {
  origin: string;
  path: string;
  duration: number;
  startAt?: number;
}): ArrivalSpec {
  return {
    origin: options.origin,
    steps: [{ name: 'feed page', method: 'GET', paths: [options.path] }],
    connections: 4,
    duration: options.duration,
    rate: READER_PER_SECOND,
    localAddress: '127.0.0.1',
    ...(options.startAt === undefined ? {} : { startAt: options.startAt }),
  };
}

export function runNeighbours(specs: ArrivalSpec[]): Promise<ArrivalResult[]> {
  return Promise.all(specs.map((spec) => runArrivals(spec)));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const specs = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as ArrivalSpec[];
  runNeighbours(specs).then(
    (results) => process.stdout.write(`${JSON.stringify(results)}\n`),
    (err: unknown) => {
      process.stderr.write(
        `neighbours failed: ${err instanceof Error ? err.message : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}
