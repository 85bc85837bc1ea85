/**
 * `npm run bench:alerts [-- --quick] [--out FILE]` (issue #46, item 5): what saved searches cost
 * a listing write, on PostgreSQL, with 0, 10,000 and 100,000 live saved searches of the shapes of
 * alert-shapes.ts, the server as `npm start` runs it with the webhook worker (so the matcher
 * runs in it and its CPU is the API's).
 *
 *  - a steady create load (arrivals.ts, an open loop at `rate`): CPU per write, the API process's
 *    and PostgreSQL's (/proc, as bench.ts measures), and latency; median of `rounds` rounds;
 *  - commit -> delivery: probe writes from this process (a listing the watcher app's saved search
 *    `q=alertprobe` matches) during the load; from each create's answer to its listing.matched
 *    reaching the HTTPS receiver here (WEBHOOK_ALLOW_PRIVATE_NETWORKS, the test CA);
 *  - saved searches examined and matched per write (the matcher's counters at /metrics), for the
 *    load's writes and for writes no saved search can match (must be 0 whatever the number).
 *
 * Seeding: the saved searches are written with SQL (jsonb_to_recordset, 5,000 a statement) into
 * saved_searches and saved_search_keys, with the keys the service would make: a word's is
 * requiredWords (match-keys.ts) of PostgreSQL's websearch_to_tsquery, a brand's `brand:` ||
 * md5(lower(brand)) as the service's SQL makes it, each with the search's price range. The run
 * checks that first: one search of each shape saved through POST /api/v1/saved_searches must get
 * the keys the seed would give it. Their owners are 200 apps of 500 each (the service's cap),
 * users and apps written with SQL too.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { openDatabase } from '../../src/db/client.ts';
import { uuidV7 } from '../../src/lib/uuid-v7.ts';
import { requiredWords } from '../../src/saved-searches/match-keys.ts';
import { createServices, type Services } from '../../src/services.ts';
import {
  counters,
  cpuPerWrite,
  keysOf,
  listingBody,
  percentileOf,
  perWrite,
  savedSearches,
  unmatchableBody,
  alertTargets,
  type Key,
  type LevelFigures,
  type SavedSearchRow,
  type Target,
} from './alert-shapes.ts';
import type { ArrivalResult, ArrivalSpec } from './arrivals.ts';
import {
  cpuSeconds,
  cpuSecondsOf,
  freePort,
  runInChild,
  startCommand,
  startProcess,
  stopProcess,
  waitForFirstResponse,
  waitUntil,
  type Server,
  callApi as call,
  runMain,
} from './processes.ts';
import { startHttpsReceiver, type HttpsReceiver } from './https-receiver.ts';
import { median, writeJudged } from './results.ts';
import { createBenchDatabase } from './seed.ts';
import {
  ATTRIBUTE_TAGS,
  BRANDS,
  COLORS,
  DETAILS,
  MATERIALS,
  NOUNS,
  STYLE_TAGS,
  STYLES,
  prng,
} from './vocabulary.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ARRIVALS = path.join(root, 'bench/src/arrivals.ts');
const log = (line: string) => process.stderr.write(`[bench:alerts] ${line}\n`);

/** The probe's word: in no listing but the probes, the watcher's one saved search's. */
const PROBE_WORD = 'alertprobe';
/** Saved searches an app may have per environment (SAVED_SEARCH_CAPS.perApp): the owners' share. */
const PER_APP = 500;
const COUNTERS = [
  'saved_search_listings_total',
  'saved_search_candidates_total',
  'saved_search_matches_total',
];

interface Settings {
  quick: boolean;
  out: string;
  serverUrl: string;
  levels: number[];
  rounds: number;
  /** Seconds of each measured round (and of the unmatchable writes' run, half of it). */
  duration: number;
  /** Writes per second of the load (the probes' come on top). */
  rate: number;
  probeEveryMs: number;
  connections: number;
}

interface Round {
  loadAverage: number;
  writes: number;
  cpuUsPerWrite: { api: number; postgres: number; total: number };
  /** Our database's backends only (pg_stat_activity): the cluster's other work left out. */
  postgresOwnUsPerWrite: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  examinedPerWrite: number;
  matchedPerWrite: number;
  /** Commit -> delivery of each probe, ms. */
  deliveries: number[];
}

interface AlertsResults {
  date: string;
  commit: string;
  machine: { cores: number; loadAverageStart: number[]; loadAverageEnd: number[] };
  settings: Omit<Settings, 'out' | 'serverUrl'>;
  seeding: { method: string; perLevel: { savedSearches: number; seconds: number }[] };
  levels: (LevelFigures & {
    rounds: Omit<Round, 'deliveries'>[];
    postgresOwnUsPerWrite: number;
    p50Ms: number;
    p99Ms: number;
    matchedPerWrite: number;
  })[];
  targets: Target[];
}

function readSettings(args: string[]): Settings {
  const quick = args.includes('--quick');
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const out = value('--out') ?? `bench/results/alerts${quick ? '.quick' : ''}.json`;
  return {
    quick,
    out: path.resolve(root, out),
    serverUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    levels: (value('--levels') ?? (quick ? '0,1000,10000' : '0,10000,100000'))
      .split(',')
      .map(Number),
    rounds: Number(value('--rounds') ?? (quick ? 1 : 3)),
    duration: Number(value('--duration') ?? (quick ? 8 : 30)),
    rate: Number(value('--rate') ?? 40),
    probeEveryMs: 250,
    connections: 8,
  };
}

/** The HTTPS receiver: each listing.matched's arrival time, by listing id. */
class Receiver {
  readonly arrived = new Map<string, number>();
  private receiver: HttpsReceiver | undefined;
  port = 0;

  async start(): Promise<void> {
    this.receiver = await startHttpsReceiver((request, answer) => {
      const body = JSON.parse(request.body) as {
        type: string;
        data: { listing?: { id: string } };
      };
      const id = body.data.listing?.id;
      if (body.type === 'listing.matched' && id && !this.arrived.has(id))
        this.arrived.set(id, request.arrived);
      answer();
    });
    this.port = this.receiver.port;
  }

  async close(): Promise<void> {
    await this.receiver?.close();
  }
}

interface Actors {
  /** The seller's live key (listings:write): every write of the run. */
  sellerKey: string;
  /** The watcher's live key (searches): the probe's saved search, the key check. */
  watcherKey: string;
}

/** The seller and the watcher, through the services; the watcher's live endpoint. */
async function createActors(services: Services, receiver: Receiver): Promise<Actors> {
  const developer = async (username: string) => {
    const user = await services.users.create({ username, password: 'bench-password-not-secret' });
    const app = await services.apps.create({ ownerUsername: user.username, name: username });
    await services.apps.completeMilestone(app.id, 'sandbox_listing');
    await services.apps.approve(app.id);
    const { key } = await services.keys.create({
      appId: app.id,
      env: 'live',
      scopes: 'read listings:write searches',
    });
    return { appId: app.id, key };
  };
  const seller = await developer('alerts_seller');
  const watcher = await developer('alerts_watcher');
  await services.endpoints.create({
    appId: watcher.appId,
    env: 'live',
    url: `https://127.0.0.1:${receiver.port}/matched`,
  });
  return { sellerKey: seller.key, watcherKey: watcher.key };
}

/**
 * The specific words (DETAILS) whose one required lexeme (the key the service gives `q`) no
 * other word of the load's listings makes: their title's other slots, brands, tags, categories,
 * description, the probe's word. With each word's key.
 */
async function alertWords(sql: postgres.Sql): Promise<Map<string, string>> {
  const other = [
    ...STYLES,
    ...COLORS,
    ...MATERIALS,
    ...NOUNS.flat(),
    ...BRANDS,
    ...STYLE_TAGS,
    ...ATTRIBUTE_TAGS,
    'Gently worn, no stains or holes; measurements in the photos.',
    PROBE_WORD,
  ].join(' ');
  const [taken] = await sql<{ lexemes: string[] }[]>`
    select tsvector_to_array(to_tsvector('english', ${other})) as lexemes`;
  const rows = await sql<{ word: string; tsquery: string }[]>`
    select word, websearch_to_tsquery('english', word)::text as tsquery
    from unnest(${DETAILS as string[]}::text[]) as word`;
  const words = new Map<string, string>();
  for (const { word, tsquery } of rows) {
    const required = requiredWords(tsquery);
    if (required?.length === 1 && !taken!.lexemes.includes(required[0]!))
      words.set(word, required[0]!);
  }
  return words;
}

/** `count` users and their apps (production approved), the saved searches' owners. */
async function createOwners(
  sql: postgres.Sql,
  count: number,
): Promise<{ app: string; user: string }[]> {
  return sql<{ app: string; user: string }[]>`
    with u as (
      insert into users (username, display_name, password_hash)
      select format('alerts_owner_%s', g), format('Alerts owner %s', g), '!bench: no sign-in'
      from generate_series(1, ${count}::int) g
      returning id, username
    ), a as (
      insert into apps (owner_id, name, production_approved)
      select id, 'Alerts of ' || username, true from u
      returning id, owner_id
    )
    select a.id::text as app, a.owner_id::text as "user" from a join u on u.id = a.owner_id
    order by u.username`;
}

/**
 * The SQL seed's token of a key (columns kind, value): a lexeme as it is; a brand as
 * SavedSearchesService's digestKey makes it.
 */
const TOKEN = `case when kind = 'brand' then 'brand:' || md5(lower(value)) else value end`;

/** Saved searches [from, to) of the run's sequence, in batches of 5,000. */
async function seedSavedSearches(
  sql: postgres.Sql,
  from: number,
  to: number,
  words: Map<string, string>,
  owners: { app: string; user: string }[],
): Promise<void> {
  const pool = [...words.keys()];
  const random = (i: number) => prng(4600 + i);
  for (let start = from; start < to; start += 5000) {
    const rows = savedSearches(start, Math.min(5000, to - start), pool, random);
    const searches = rows.map((row, k) => {
      const owner = owners[Math.floor((start + k) / PER_APP)]!;
      return {
        id: uuidV7(Date.now()),
        app_id: owner.app,
        user_id: owner.user,
        name: `alert ${start + k}`,
        q: row.q,
        size: row.size,
        brand: row.brand,
        min_price_cents: row.minPriceCents,
        max_price_cents: row.maxPriceCents,
      };
    });
    const keys = rows.flatMap((row, k) =>
      keysOf(row, row.q === null ? null : [words.get(row.q)!]).map((key) => ({
        id: searches[k]!.id,
        ...keyValue(key),
      })),
    );
    await sql.begin(async (tx) => {
      await tx`
        insert into saved_searches (id, app_id, environment, user_id, via_token, name, q, size,
          brand, min_price_cents, max_price_cents)
        select id, app_id, 'live', user_id, false, name, q, size, brand, min_price_cents,
          max_price_cents
        from jsonb_to_recordset(${tx.json(searches)}::jsonb) as t(id uuid, app_id uuid,
          user_id uuid, name text, q text, size text, brand text, min_price_cents int,
          max_price_cents int)`;
      await tx.unsafe(
        // With the search's price range, as the service's keys have it.
        `insert into saved_search_keys (token, saved_search_id, min_price_cents, max_price_cents)
         select distinct ${TOKEN}, t.id, coalesce(s.min_price_cents, 0),
           coalesce(s.max_price_cents, 2147483647)
         from jsonb_to_recordset($1::jsonb) as t(id uuid, kind text, value text)
         join saved_searches s on s.id = t.id`,
        [keys as never],
      );
    });
  }
}

const keyValue = (key: Key) =>
  key.kind === 'brand' ? { kind: 'brand', value: key.brand } : { kind: 'word', value: key.lexeme };

/** POST /api/v1/... or DELETE with a key; the answer's JSON. */
const apiBody = (row: SavedSearchRow) => ({
  name: 'key check',
  ...(row.q === null ? {} : { q: row.q }),
  ...(row.size === null ? {} : { size: row.size }),
  ...(row.brand === null ? {} : { brand: row.brand }),
  ...(row.minPriceCents === null ? {} : { min_price_cents: row.minPriceCents }),
  ...(row.maxPriceCents === null ? {} : { max_price_cents: row.maxPriceCents }),
});

/**
 * One search of each shape saved through the API gets the keys the SQL seed gives it (then
 * deleted): the seed is the service's, or the run stops.
 */
async function checkSeedKeys(
  sql: postgres.Sql,
  api: Server,
  watcherKey: string,
  words: Map<string, string>,
): Promise<void> {
  for (const row of savedSearches(0, 3, [...words.keys()], (i) => prng(4600 + i))) {
    const saved = await call(api, 'POST', '/api/v1/saved_searches', watcherKey, apiBody(row));
    if (saved.status !== 201) throw new Error(`saving ${row.shape}: ${saved.status}`);
    const id = saved.body.data.id;
    // Each key with its price range: `token min-max`.
    const [made] = await sql<{ tokens: string[] }[]>`
      select array_agg(token || ' ' || min_price_cents || '-' || max_price_cents order by token)
        as tokens
      from saved_search_keys where saved_search_id = ${id}`;
    const expected = keysOf(row, row.q === null ? null : [words.get(row.q)!]).map(keyValue);
    const [seeded] = await sql.unsafe<{ tokens: string[] }[]>(
      `select array_agg(distinct key order by key) as tokens
       from jsonb_to_recordset($1::jsonb) as t(kind text, value text),
         lateral (select ${TOKEN} || ' ' || $2::int || '-' || $3::int as key) k`,
      [expected as never, row.minPriceCents ?? 0, row.maxPriceCents ?? 2147483647],
    );
    if (JSON.stringify(made!.tokens) !== JSON.stringify(seeded!.tokens))
      throw new Error(
        `${row.shape}: the service made ${made!.tokens.join(',')}, the seed ${seeded!.tokens.join(',')}`,
      );
    await call(api, 'DELETE', `/api/v1/saved_searches/${id}`, watcherKey);
  }
  log('the seed gives each shape the keys the service gives it');
}

/** The run's server, its database and what a round reads from both. */
class Run {
  private readonly tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-alerts-'));
  private specs = 0;
  private probeSerial = 0;
  readonly metricsToken = randomBytes(24).toString('hex');
  api!: Server;

  constructor(
    private readonly settings: Settings,
    private readonly sql: postgres.Sql,
    private readonly databaseName: string,
    private readonly actors: Actors,
    private readonly receiver: Receiver,
  ) {}

  async startApi(databaseUrl: string): Promise<void> {
    const port = await freePort();
    this.api = startProcess(
      'API server',
      [...(process.env.BENCH_SERVER_FLAGS ?? '').split(' ').filter(Boolean), ...startCommand(root)],
      {
        DATABASE_URL: databaseUrl,
        NODE_ENV: 'production',
        SESSION_SECRET: randomBytes(32).toString('base64url'),
        LOG_LEVEL: 'warn',
        RATE_LIMIT_MAX: '1000000',
        METRICS_TOKEN: this.metricsToken,
        REQUEST_LOGS: 'true',
        REDIS_URL: undefined,
        HOST: '127.0.0.1',
        BASE_URL: undefined,
        WEBHOOK_WORKER: 'true',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        NODE_EXTRA_CA_CERTS: path.join(root, 'test/fixtures/tls/ca.pem'),
      },
      port,
    );
    await waitForFirstResponse(this.api, '/api/v1/health?db=1', performance.now());
  }

  async metrics(): Promise<Record<string, number>> {
    const response = await fetch(`${this.api.origin}/metrics`, {
      headers: { authorization: `Bearer ${this.metricsToken}` },
    });
    if (!response.ok) throw new Error(`GET /metrics: ${response.status}`);
    return counters(await response.text(), COUNTERS);
  }

  /** VACUUM (ANALYZE) of what the rounds write and a CHECKPOINT, as bench.ts settles. */
  async settle(): Promise<void> {
    await this.sql.unsafe(
      'vacuum (analyze) listings, listing_match_queue, saved_search_matches, webhook_events, webhook_deliveries',
    );
    await this.sql.unsafe('checkpoint');
  }

  private async ownBackends(): Promise<number[]> {
    const rows = await this.sql<{ pid: number }[]>`
      select pid from pg_stat_activity where datname = ${this.databaseName} and pid <> pg_backend_pid()`;
    return rows.map((r) => r.pid);
  }

  /**
   * One round: the load (bodies in turn at `rate`) for `seconds`, probes meanwhile when
   * `probes`, then the match queue drained and the probes delivered; CPU over all of it.
   */
  async round(bodies: string[], seconds: number, probes: boolean): Promise<Round> {
    await this.settle();
    const loadAverage = os.loadavg()[0]!;
    const spec: ArrivalSpec = {
      origin: this.api.origin,
      steps: [
        {
          name: 'create',
          method: 'POST',
          paths: ['/api/v1/listings'],
          bodies,
          headers: { authorization: `Bearer ${this.actors.sellerKey}` },
        },
      ],
      connections: this.settings.connections,
      duration: seconds,
      rate: this.settings.rate,
    };
    const file = path.join(this.tmp, `spec-${(this.specs += 1)}.json`);
    writeFileSync(file, JSON.stringify(spec));
    const backends = await this.ownBackends();
    const counted = await this.metrics();
    const before = {
      api: cpuSeconds(this.api.child.pid!),
      postgres: cpuSecondsOf('postgres'),
      own: backends.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    };
    const load = runInChild<ArrivalResult>(ARRIVALS, [file]);
    let running = true;
    void load.finally(() => (running = false)).catch(() => {});
    const sent: { id: string; answeredAt: number }[] = [];
    while (probes && running) {
      const next = prng(9000 + this.probeSerial);
      const body = listingBody((this.probeSerial += 1), next, PROBE_WORD);
      const created = await call(this.api, 'POST', '/api/v1/listings', this.actors.sellerKey, body);
      const answeredAt = Date.now();
      if (created.status !== 201) throw new Error(`a probe's create: ${created.status}`);
      sent.push({ id: created.body.data.id, answeredAt });
      await sleep(this.settings.probeEveryMs);
    }
    const result = await load;
    await waitUntil(
      'the match queue drained and the probes delivered',
      async () => {
        const [queue] = await this.sql<{ n: number }[]>`
          select count(*)::int as n from listing_match_queue`;
        return queue!.n === 0 && sent.every((probe) => this.receiver.arrived.has(probe.id));
      },
      120_000,
      50,
    );
    const api = cpuSeconds(this.api.child.pid!) - before.api;
    const pg = cpuSecondsOf('postgres') - before.postgres;
    const own = backends.reduce((sum, pid) => sum + cpuSeconds(pid), 0) - before.own;
    const counts = perWrite(counted, await this.metrics());
    const non2xx = Object.entries(result.statusCodes)
      .filter(([code]) => !code.startsWith('2'))
      .reduce((n, [, count]) => n + count, result.errors + result.late);
    return {
      loadAverage: Math.round(loadAverage * 10) / 10,
      writes: counts.listings,
      cpuUsPerWrite: cpuPerWrite(api, pg, counts.listings),
      postgresOwnUsPerWrite: cpuPerWrite(0, own, counts.listings).postgres,
      p50Ms: result.p50,
      p99Ms: result.p99,
      non2xx,
      examinedPerWrite: counts.examinedPerWrite,
      matchedPerWrite: counts.matchedPerWrite,
      deliveries: sent.map((probe) => this.receiver.arrived.get(probe.id)! - probe.answeredAt),
    };
  }

  /** The watcher's saved search of the probe's word, through the API. */
  async saveProbeSearch(): Promise<void> {
    const saved = await call(this.api, 'POST', '/api/v1/saved_searches', this.actors.watcherKey, {
      name: 'probe',
      q: PROBE_WORD,
    });
    if (saved.status !== 201) throw new Error(`saving the probe's search: ${saved.status}`);
  }

  async close(): Promise<void> {
    if (this.api) await stopProcess(this.api, 20_000);
    rmSync(this.tmp, { recursive: true, force: true });
  }
}

const LOAD_BODIES = 3000;

async function main(): Promise<number> {
  const settings = readSettings(process.argv.slice(2));
  const loadAverageStart = os.loadavg();
  if (loadAverageStart[0]! > os.cpus().length)
    log(
      `load average ${loadAverageStart[0]!.toFixed(1)} on ${os.cpus().length} cores: expect noise`,
    );
  log('building the server (npm run build)');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  const receiver = new Receiver();
  await receiver.start();
  const database = await createBenchDatabase(settings.serverUrl);
  log(`database ${database.name}`);
  const handle = await openDatabase({ databaseUrl: database.url, pgliteDir: '', poolSize: 2 });
  const sql = postgres(database.url, { max: 1, onnotice: () => {} });
  let run: Run | undefined;
  try {
    const services = createServices(handle.db, { webhooks: { allowPrivateNetworks: true } });
    const actors = await createActors(services, receiver);
    const maxLevel = Math.max(...settings.levels);
    const owners = await createOwners(sql, Math.max(1, Math.ceil(maxLevel / PER_APP)));
    const words = await alertWords(sql);
    log(`${words.size} of ${DETAILS.length} specific words are alert words`);
    run = new Run(settings, sql, database.name, actors, receiver);
    await run.startApi(database.url);
    await checkSeedKeys(sql, run.api, actors.watcherKey, words);

    const next = prng(46);
    const bodies = Array.from({ length: LOAD_BODIES }, (_, n) =>
      JSON.stringify(listingBody(n, next)),
    );
    const unmatchable = Array.from({ length: 500 }, (_, n) => JSON.stringify(unmatchableBody(n)));
    log('warm-up round (not counted)');
    await run.round(bodies, Math.min(10, settings.duration), false);

    const levels: AlertsResults['levels'] = [];
    const seeding: AlertsResults['seeding']['perLevel'] = [];
    let seeded = 0;
    for (const level of settings.levels) {
      const started = performance.now();
      await seedSavedSearches(sql, seeded, level, words, owners);
      seeded = Math.max(seeded, level);
      await sql.unsafe('analyze saved_searches, saved_search_keys');
      seeding.push({
        savedSearches: level,
        seconds: Math.round(performance.now() - started) / 1000,
      });
      const [count] = await sql<{ n: number }[]>`select count(*)::int as n from saved_searches`;
      // The probe's saved search comes with the first saved searches: none at 0.
      if (level > 0 && count!.n === level) await run.saveProbeSearch();
      log(
        `${level} saved searches (+ the probe's: ${count!.n > 0 ? 1 : 0}); seeded in ${seeding.at(-1)!.seconds} s`,
      );
      const rounds: Round[] = [];
      for (let r = 0; r < settings.rounds; r += 1) {
        const round = await run.round(bodies, settings.duration, level > 0);
        rounds.push(round);
        log(
          `  round ${r + 1}: ${round.writes} writes, CPU/write API ${round.cpuUsPerWrite.api} + PostgreSQL ${round.cpuUsPerWrite.postgres} µs (own backends ${round.postgresOwnUsPerWrite}); p50 ${round.p50Ms} p99 ${round.p99Ms} ms; examined ${round.examinedPerWrite}, matched ${round.matchedPerWrite} a write; delivery p50 ${percentileOf(round.deliveries, 50)} ms (${round.deliveries.length}); load ${round.loadAverage}`,
        );
      }
      const none = await run.round(unmatchable, Math.ceil(settings.duration / 2), false);
      log(`  unmatchable writes: ${none.writes}, examined ${none.examinedPerWrite} a write`);
      const deliveries = rounds.flatMap((round) => round.deliveries);
      const mid = (pick: (round: Round) => number) => median(rounds.map(pick));
      levels.push({
        savedSearches: level,
        rounds: rounds.map(({ deliveries: _, ...rest }) => rest),
        cpuUsPerWrite: {
          api: mid((r) => r.cpuUsPerWrite.api),
          postgres: mid((r) => r.cpuUsPerWrite.postgres),
          total: mid((r) => r.cpuUsPerWrite.total),
        },
        postgresOwnUsPerWrite: mid((r) => r.postgresOwnUsPerWrite),
        p50Ms: mid((r) => r.p50Ms),
        p99Ms: mid((r) => r.p99Ms),
        examinedPerWrite: mid((r) => r.examinedPerWrite),
        matchedPerWrite: mid((r) => r.matchedPerWrite),
        delivery: deliveries.length
          ? {
              samples: deliveries.length,
              p50Ms: percentileOf(deliveries, 50),
              p99Ms: percentileOf(deliveries, 99),
            }
          : null,
        unmatchable: {
          writes: none.writes,
          examinedPerWrite: none.examinedPerWrite,
          cpuUsPerWrite: none.cpuUsPerWrite.total,
        },
      });
    }
    const measured = {
      date: new Date().toISOString(),
      commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root })
        .toString()
        .trim(),
      machine: { cores: os.cpus().length, loadAverageStart, loadAverageEnd: os.loadavg() },
      settings: {
        quick: settings.quick,
        levels: settings.levels,
        rounds: settings.rounds,
        duration: settings.duration,
        rate: settings.rate,
        probeEveryMs: settings.probeEveryMs,
        connections: settings.connections,
      },
      seeding: {
        method:
          'SQL (jsonb_to_recordset, 5,000 a statement) into saved_searches and saved_search_keys, keys as the service makes them (checked against POST /api/v1/saved_searches)',
        perLevel: seeding,
      },
      levels,
    };
    const results: AlertsResults = { ...measured, targets: alertTargets(levels) };
    writeJudged(settings.out, results, root);
    return 0;
  } finally {
    await run?.close();
    await sql.end({ timeout: 5 });
    await handle.close();
    await receiver.close();
    // BENCH_KEEP=1: the database stays, to look into (EXPLAIN) what the run measured.
    if (!process.env.BENCH_KEEP) await database.drop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) runMain('bench:alerts', main);
