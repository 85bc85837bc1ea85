/**
 * The capacity model of docs/scaling.md, computed from measured figures, never typed in: the
 * CPU per request of the API process and of PostgreSQL per scenario
 * (bench/results/results.json, and bench/results/search.1m.json for searches at 1,000,000
 * listings) and what each kind of request writes (bench/results/volume.json, `npm run
 * bench:volume`), weighted by the traffic mix below.
 * Rewrites the block between the capacity markers of docs/scaling.md
 * (bench/test/capacity.test.ts fails while the block differs from what the files give).
 *
 *   npm run bench:capacity
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { projectFile } from '../../src/project-files.ts';
import { blockContent, replaceBlock } from './doc-block.ts';

interface Cpu {
  api: number;
  postgresApi: number;
}
interface BenchFile {
  date: string;
  command: string;
  scenarios: { name: string; label: string; cpu: Cpu }[];
}
interface VolumeFile {
  at: string;
  results: {
    kind: string;
    pass: number;
    walBytesPerRequest: number;
    tableBytesPerRequest: Record<string, number>;
  }[];
}

const read = <T>(file: string): T => JSON.parse(readFileSync(projectFile(file), 'utf8')) as T;
const main = read<BenchFile>('bench/results/results.json');
const search = read<BenchFile>('bench/results/search.1m.json');
const volume = read<VolumeFile>('bench/results/volume.json');
/** `npm run bench:retention` (bench/src/retention.ts): a day of the request log removed. */
interface RetentionFile {
  at: string;
  rows: number;
  delete: { rows: number; walBytes: number; ms: number };
  drop: { walBytes: number; ms: number; longestInsertMs: number };
}
const retention = read<RetentionFile>('bench/results/retention.json');
/** `npm run bench:retention:outbox` (bench/src/retention-outbox.ts): a week of events removed. */
interface OutboxRetentionFile {
  at: string;
  events: number;
  delete: { events: number; walBytes: number; ms: number };
  drop: { walBytes: number; ms: number };
  insert: { usPerEventBefore: number; usPerEventAfter: number };
}
const outboxRetention = read<OutboxRetentionFile>('bench/results/retention-outbox.json');

/**
 * The stated traffic mix of a marketplace's API, in percent: mostly anonymous browsing (feed
 * pages, a listing, searches; two thirds), integrations' keyed reads and syncs (a quarter), and
 * writes (a tenth). `anonymous` marks what a replica may serve (docs/operations.md).
 */
const MIX: { scenario: string; file: BenchFile; percent: number; anonymous: boolean }[] = [
  { scenario: 'list', file: main, percent: 20, anonymous: true },
  { scenario: 'poll', file: main, percent: 5, anonymous: true },
  { scenario: 'get', file: main, percent: 25, anonymous: true },
  { scenario: 'search-common', file: search, percent: 10, anonymous: true },
  { scenario: 'search-price', file: search, percent: 5, anonymous: true },
  { scenario: 'get-oauth', file: main, percent: 15, anonymous: false },
  { scenario: 'search-sync', file: search, percent: 5, anonymous: false },
  { scenario: 'search-owner', file: search, percent: 5, anonymous: false },
  { scenario: 'create', file: main, percent: 4, anonymous: false },
  { scenario: 'patch', file: main, percent: 4, anonymous: false },
  { scenario: 'replay', file: main, percent: 1, anonymous: false },
  { scenario: 'batch', file: main, percent: 1, anonymous: false },
];
/** Cores are planned at this share busy: headroom for bursts, GC and failover. */
const UTILISATION = 0.6;
const RATES = [1_000, 10_000, 50_000];
/**
 * Connections one API process holds to the primary without a pooler: its pool (10), the request
 * log's, the LISTEN, the replica's lag poll (docs/operations.md, "Database topology").
 */
const CONNECTIONS_PER_PROCESS = 13;
/** Behind PgBouncer, what stays direct per process: the LISTEN and the replica's lag poll. */
const DIRECT_PER_PROCESS = 2;
/** PostgreSQL's default max_connections. */
const MAX_CONNECTIONS = 100;
/** A planned replica's size, cores. */
const REPLICA_CORES = 16;
/** Webhook endpoints per app that receive a write's event (one delivery row each). */
const ENDPOINTS = 1;
const DAY = 86_400;
const REQUEST_LOG_DAYS = 14;
const EVENT_DAYS = 30;
/** A table this large at retention is to be partitioned by time (docs/scaling.md). */
const PARTITION_AT = 50e9;

function cpuOf(scenario: string, file: BenchFile): Cpu & { label: string } {
  const found = file.scenarios.find((s) => s.name === scenario);
  if (!found) throw new Error(`${scenario}: not in the results of ${file.command}`);
  return { ...found.cpu, label: found.label };
}

function volumeOf(prefix: string): VolumeFile['results'][number] {
  const found = volume.results.find((r) => r.pass === 2 && r.kind.startsWith(prefix));
  if (!found) throw new Error(`${prefix}: not in bench/results/volume.json`);
  return found;
}

const us = (n: number) => Math.round(n).toLocaleString('en-US');
const cores = (n: number) => (n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US'));
const bytes = (n: number) => {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i += 1;
  }
  return `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[i]}`;
};

function block(): string {
  const rows = MIX.map((m) => ({ ...m, cpu: cpuOf(m.scenario, m.file) }));
  const weighted = (pick: (r: (typeof rows)[number]) => number, only?: boolean) =>
    rows
      .filter((r) => only === undefined || r.anonymous === only)
      .reduce((sum, r) => sum + (r.percent / 100) * pick(r), 0);
  const api = weighted((r) => r.cpu.api);
  const pg = weighted((r) => r.cpu.postgresApi);
  const pgAnonymous = weighted((r) => r.cpu.postgresApi, true);
  const pgPrimary = pg - pgAnonymous;
  const share = (predicate: (r: (typeof rows)[number]) => boolean) =>
    rows.filter(predicate).reduce((sum, r) => sum + r.percent / 100, 0);
  const keyedShare = share((r) => !r.anonymous);
  const writeShare = share((r) => ['create', 'patch', 'batch'].includes(r.scenario));

  const post = volumeOf('POST');
  const patch = volumeOf('PATCH');
  const keyedGet = volumeOf('GET /listings/{id}');
  const logRow = keyedGet.tableBytesPerRequest.request_logs!;
  const eventRow =
    (post.tableBytesPerRequest.webhook_events! + patch.tableBytesPerRequest.webhook_events!) / 2;
  const deliveryRow =
    (post.tableBytesPerRequest.webhook_deliveries! +
      patch.tableBytesPerRequest.webhook_deliveries!) /
    2;
  const writeWal = (post.walBytesPerRequest + patch.walBytesPerRequest) / 2;
  const readWal = keyedGet.walBytesPerRequest;

  const lines: string[] = [];
  lines.push(
    `Sources: \`${main.command}\` (${main.date}, bench/results/results.json) and \`${search.command}\` ` +
      `(${search.date}, bench/results/search.1m.json) for CPU per request; \`npm run bench:volume\` ` +
      `(${volume.at}, bench/results/volume.json, its second pass) for what requests write. ` +
      `Cores planned at ${UTILISATION * 100}% busy.`,
    '',
    '| share of requests | scenario (measured) | API CPU per request, µs | PostgreSQL CPU per request, µs | a replica may serve it |',
    '| ---: | --- | ---: | ---: | --- |',
  );
  for (const r of rows)
    lines.push(
      `| ${r.percent}% | ${r.cpu.label} | ${us(r.cpu.api)} | ${us(r.cpu.postgresApi)} | ${r.anonymous ? 'yes' : 'no'} |`,
    );
  lines.push(
    `| 100% | **the mix** | **${us(api)}** | **${us(pg)}** (primary ${us(pgPrimary)}, replicas ${us(pgAnonymous)}) | ${Math.round((1 - keyedShare) * 100)}% |`,
    '',
    '| requests/s | API processes (1 core each) | PostgreSQL cores, one primary | with replicas: primary + replica cores (replicas of ' +
      `${REPLICA_CORES} cores) | connections without a pooler (${CONNECTIONS_PER_PROCESS} per process) | ` +
      `through PgBouncer: server connections (2 per primary core) + direct (${DIRECT_PER_PROCESS} per process) |`,
    '| ---: | ---: | ---: | --- | ---: | --- |',
  );
  for (const rate of RATES) {
    const processes = Math.ceil((rate * api) / 1e6 / UTILISATION);
    const pgCores = (rate * pg) / 1e6 / UTILISATION;
    const primaryCores = (rate * pgPrimary) / 1e6 / UTILISATION;
    const replicaCores = (rate * pgAnonymous) / 1e6 / UTILISATION;
    const replicas = Math.max(1, Math.ceil(replicaCores / REPLICA_CORES));
    const direct = processes * CONNECTIONS_PER_PROCESS;
    const pooled = Math.max(4, Math.ceil(primaryCores) * 2);
    lines.push(
      `| ${rate.toLocaleString('en-US')} | ${processes} | ${cores(pgCores)} | ${cores(primaryCores)} + ` +
        `${cores(replicaCores)} (${replicas} replica${replicas > 1 ? 's' : ''}) | ` +
        `${direct.toLocaleString('en-US')}${direct > MAX_CONNECTIONS ? ` (over max_connections ${MAX_CONNECTIONS})` : ''} | ` +
        `${pooled} + ${processes * DIRECT_PER_PROCESS} |`,
    );
  }
  lines.push(
    '',
    `Writes per request (bench/results/volume.json, second pass): a keyed request's log row ${bytes(logRow)} ` +
      `with its indexes; a write's event ${bytes(eventRow)} and ${bytes(deliveryRow)} a delivery ` +
      `per endpoint; WAL ${bytes(writeWal)} a write, ${bytes(readWal)} a keyed read, none an ` +
      'anonymous read.',
    '',
    `| requests/s | request log, per day (kept ${REQUEST_LOG_DAYS} days) | outbox, per day (events and ${ENDPOINTS} delivery each, kept ${EVENT_DAYS} days) | tables at retention | WAL per day |`,
    '| ---: | ---: | ---: | ---: | ---: |',
  );
  for (const rate of RATES) {
    const logDay = rate * keyedShare * logRow * DAY;
    const outboxDay = rate * writeShare * (eventRow + ENDPOINTS * deliveryRow) * DAY;
    const walDay = rate * DAY * (writeShare * writeWal + (keyedShare - writeShare) * readWal);
    lines.push(
      `| ${rate.toLocaleString('en-US')} | ${bytes(logDay)} | ${bytes(outboxDay)} | ` +
        `${bytes(logDay * REQUEST_LOG_DAYS + outboxDay * EVENT_DAYS)} | ${bytes(walDay)} |`,
    );
  }
  const perRate = (bytesPerDay: number, days: number) => PARTITION_AT / (bytesPerDay * days);
  const logAt = perRate(keyedShare * logRow * DAY, REQUEST_LOG_DAYS);
  const outboxAt = perRate(writeShare * (eventRow + ENDPOINTS * deliveryRow) * DAY, EVENT_DAYS);
  // A DELETE's WAL grows with the rows it removes; a partition's DROP writes the catalog only.
  const deleteWalPerRow = retention.delete.walBytes / retention.delete.rows;
  const logRowsDay = 1000 * keyedShare * DAY;
  const eventDeleteWal = outboxRetention.delete.walBytes / outboxRetention.delete.events;
  const eventsWeek = 1000 * writeShare * 7 * DAY;
  lines.push(
    '',
    `Each table holds ${bytes(PARTITION_AT)} at retention (the size to partition it by time at, ` +
      `below) from about ${Math.round(logAt).toLocaleString('en-US')} requests/s of this mix ` +
      `for the request log and ${Math.round(outboxAt).toLocaleString('en-US')} for the outbox.`,
    '',
    `Retention (\`npm run bench:retention\`, ${retention.at}, bench/results/retention.json, a day ` +
      `of ${retention.rows.toLocaleString('en-US')} log rows): removed by the batched \`DELETE\` ` +
      `the request log used before it was partitioned, a day wrote ${bytes(deleteWalPerRow)} of WAL ` +
      `a row in ${(retention.delete.ms / 1000).toFixed(1)} s, so ` +
      `${bytes(deleteWalPerRow * logRowsDay)} a day at 1,000 requests/s of this mix; dropped as ` +
      `a day's partition (how the log is kept now), ${bytes(retention.drop.walBytes)} in ` +
      `${retention.drop.ms} ms whatever its rows, the log's writes never waiting longer than ` +
      `${retention.drop.longestInsertMs} ms meanwhile.`,
    '',
    `The outbox's (\`npm run bench:retention:outbox\`, ${outboxRetention.at}, ` +
      `bench/results/retention-outbox.json, a week of ` +
      `${outboxRetention.events.toLocaleString('en-US')} events, each with a delivery and an ` +
      `attempt): removed by the batched \`DELETE\` the worker ran before partitioning (the ` +
      `deliveries and attempts by cascade), a week wrote ${bytes(eventDeleteWal)} of WAL an event ` +
      `in ${(outboxRetention.delete.ms / 1000).toFixed(1)} s, so ` +
      `${bytes(eventDeleteWal * eventsWeek)} a week at 1,000 requests/s of this mix; dropped as ` +
      `the week's partitions of the three tables (how the outbox is kept now), ` +
      `${bytes(outboxRetention.drop.walBytes)} in ${outboxRetention.drop.ms} ms whatever their ` +
      `rows. Writing an event with its delivery and attempt, 500 a statement: ` +
      `${outboxRetention.insert.usPerEventBefore} µs an event before partitioning, ` +
      `${outboxRetention.insert.usPerEventAfter} µs after.`,
  );
  return lines.join('\n');
}

const START =
  '<!-- capacity:start (generated by `npm run bench:capacity`; edit bench/src/capacity.ts, not this) -->';
const END = '<!-- capacity:end -->';
const doc = path.join(projectFile('docs'), 'scaling.md');

/** The block docs/scaling.md holds now, and the one the results files give. */
export function capacityBlocks(): { committed: string; computed: string } {
  return { committed: blockContent(doc, START, END), computed: block() };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  replaceBlock(doc, START, END, `${START}\n${block()}\n${END}`);
  console.log(`${doc}: capacity block rewritten`);
}
