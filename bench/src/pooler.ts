/**
 * What a transaction-mode pooler costs (bench/LOG.md, "Behind PgBouncer"): the built
 * server, as `npm start` runs it, on a seeded bench database in three set-ups, in turn within
 * each round:
 *
 *   direct           DATABASE_URL to PostgreSQL, prepared statements on (the default);
 *   direct-unprepared  the same with DATABASE_PREPARED_STATEMENTS=off: what the pooler's lack of
 *                    prepared statements costs by itself;
 *   pgbouncer        DATABASE_URL through PgBouncer (pool_mode = transaction, as
 *                    docs/operations.md sets it up, prepared statements off as 1.18 needs) and
 *                    DATABASE_DIRECT_URL to PostgreSQL.
 *
 * Scenarios of `npm run bench` (the anonymous feed page, a listing by id, a create with a
 * sandbox key), each run `--duration` seconds with `--connections` connections after a warm-up;
 * medians over `--rounds` of req/s and CPU milliseconds per request of the API process, of
 * PostgreSQL (every `postgres` process of the machine) and of PgBouncer. Loopback only, on the
 * PostgreSQL of DATABASE_URL (a database of its own, dropped at the end).
 *
 *   npm run bench:pooler -- [--rounds 3] [--duration 5] [--connections 50] [--listings 20000]
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { LoadResult, LoadSpec } from './load.ts';
import {
  cpuSeconds,
  cpuSecondsOf,
  freePort,
  runInChild,
  startCommand,
  startProcess,
  stopProcess,
  waitForFirstResponse,
  type Server,
} from './processes.ts';
import { REPLAY_KEYS } from './replay-keys.ts';
import { defineScenarios, type ScenarioName } from './scenarios.ts';
import { createBenchDatabase, seed } from './seed.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const LOAD = path.join(root, 'bench/src/load.ts');
const SCENARIOS: ScenarioName[] = ['list', 'get', 'create'];
const SETUPS = ['direct', 'direct-unprepared', 'pgbouncer'] as const;
type Setup = (typeof SETUPS)[number];

const log = (line: string) => process.stderr.write(`[bench:pooler] ${line}\n`);

function options(argv: string[]) {
  const values = { rounds: 3, duration: 5, warmup: 2, connections: 50, listings: 20_000 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i]!.replace(/^--/, '') as keyof typeof values;
    const value = Number(argv[i + 1]);
    if (!(key in values) || !Number.isFinite(value) || value < 1)
      throw new Error(
        `usage: npm run bench:pooler -- [--rounds N] [--duration S] [--warmup S] ` +
          `[--connections N] [--listings N] (got ${argv[i]} ${argv[i + 1]})`,
      );
    values[key] = value;
  }
  return values;
}

/** PgBouncer in transaction mode in front of the server, as .ci/run starts it. */
async function startPgbouncer(target: URL): Promise<{ port: number; stop(): void }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-pgbouncer-'));
  const port = await freePort();
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${target.hostname} port=${target.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      // The API's pool and the request log's connection, with room to spare.
      'default_pool_size = 20',
      'max_client_conn = 200',
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const id = (flag: string) =>
      Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const program = ['/usr/sbin/pgbouncer', 'pgbouncer'].find((p) => {
    try {
      execFileSync(p, ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  });
  if (!program) throw new Error('pgbouncer not found (apt-get install pgbouncer)');
  const child: ChildProcess = spawn(
    program,
    [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let i = 0; i < 100 && !/process up/.test(output); i += 1) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    stop() {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  const serverUrl = process.env.DATABASE_URL?.startsWith('postgres')
    ? process.env.DATABASE_URL
    : 'postgres://postgres@127.0.0.1:5432/postgres';
  log('building the server (npm run build)');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  const database = await createBenchDatabase(serverUrl);
  const cleanup: (() => unknown)[] = [() => database.drop()];
  const servers: Server[] = [];
  try {
    log(`seeding ${opts.listings} listings into ${database.name}`);
    const fixtures = await seed(database.url, {
      listings: opts.listings,
      sellers: 200,
      sandboxListings: 2000,
      crowdedListings: REPLAY_KEYS,
      deepPages: 10,
    });
    const { scenarios } = defineScenarios(fixtures);
    const bouncer = await startPgbouncer(new URL(serverUrl));
    cleanup.unshift(() => bouncer.stop());
    const pooled = new URL(database.url);
    pooled.port = String(bouncer.port);
    const envOf = (setup: Setup): Record<string, string | undefined> => ({
      NODE_ENV: 'production',
      SESSION_SECRET: 'a bench session secret of at least 32 characters',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '1000000',
      REDIS_URL: undefined,
      METRICS_TOKEN: undefined,
      BASE_URL: undefined,
      HOST: '127.0.0.1',
      DATABASE_URL: setup === 'pgbouncer' ? pooled.toString() : database.url,
      DATABASE_DIRECT_URL: setup === 'pgbouncer' ? database.url : undefined,
      DATABASE_PREPARED_STATEMENTS: setup === 'direct' ? 'on' : 'off',
    });
    const settle = postgres(database.url, { max: 1, onnotice: () => {} });
    cleanup.unshift(() => settle.end({ timeout: 5 }));
    const results = new Map<string, { rps: number; api: number; pg: number; bouncer: number }[]>();
    for (let round = 1; round <= opts.rounds; round += 1) {
      for (const setup of SETUPS) {
        const port = await freePort();
        const server = startProcess(`API (${setup})`, startCommand(root), envOf(setup), port);
        servers.push(server);
        await waitForFirstResponse(server, '/api/v1/health?db=1', performance.now());
        for (const scenario of scenarios.filter((s) => SCENARIOS.includes(s.name))) {
          const spec = (duration: number): LoadSpec => ({
            ...scenario.api,
            origin: server.origin,
            connections: opts.connections,
            duration,
          });
          const file = path.join(os.tmpdir(), `bench-pooler-${process.pid}.json`);
          writeFileSync(file, JSON.stringify(spec(opts.warmup)));
          await runInChild<LoadResult>(LOAD, [file]);
          await settle.unsafe('vacuum (analyze) listings');
          await settle.unsafe('checkpoint');
          writeFileSync(file, JSON.stringify(spec(opts.duration)));
          const before = [
            cpuSeconds(server.child.pid!),
            cpuSecondsOf('postgres'),
            cpuSecondsOf('pgbouncer'),
          ];
          const load = await runInChild<LoadResult>(LOAD, [file]);
          const after = [
            cpuSeconds(server.child.pid!),
            cpuSecondsOf('postgres'),
            cpuSecondsOf('pgbouncer'),
          ];
          rmSync(file, { force: true });
          const wrong = Object.keys(load.statusCodes).filter((c) => Number(c) !== scenario.status);
          if (load.errors > 0 || wrong.length > 0)
            throw new Error(
              `${setup} ${scenario.name}: ${load.errors} errors, statuses ${JSON.stringify(load.statusCodes)}`,
            );
          const perRequest = (i: number) => ((after[i]! - before[i]!) * 1000) / load.requests;
          const row = {
            rps: load.rps,
            api: perRequest(0),
            pg: perRequest(1),
            bouncer: perRequest(2),
          };
          const key = `${scenario.name} ${setup}`;
          results.set(key, [...(results.get(key) ?? []), row]);
          log(
            `round ${round} ${key}: ${row.rps.toFixed(0)} req/s, CPU ms/request API ` +
              `${row.api.toFixed(3)}, PostgreSQL ${row.pg.toFixed(3)}, PgBouncer ${row.bouncer.toFixed(3)}`,
          );
        }
        await stopProcess(servers.pop()!);
      }
    }
    const lines = [
      `| scenario | set-up | req/s | API CPU ms/req | PostgreSQL CPU ms/req | PgBouncer CPU ms/req |`,
      `|---|---|---:|---:|---:|---:|`,
    ];
    for (const [key, rows] of results) {
      const [scenario, setup] = key.split(' ');
      const m = (pick: (r: (typeof rows)[number]) => number) => median(rows.map(pick));
      lines.push(
        `| ${scenario} | ${setup} | ${m((r) => r.rps).toFixed(0)} | ${m((r) => r.api).toFixed(3)} | ` +
          `${m((r) => r.pg).toFixed(3)} | ${m((r) => r.bouncer).toFixed(3)} |`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const server of servers) await stopProcess(server).catch(() => undefined);
    for (const step of cleanup) await step();
  }
}

await main();
