/**
 * Private backing services for tests that stop and start them: a PostgreSQL cluster of its
 * own (initdb into a temporary directory, on a free loopback port) and a redis-server child
 * process. The shared servers of the machine (PostgreSQL on 5432, Redis on 6379) are never
 * touched. Everything is stopped and removed in teardown, and every wait is bounded.
 *
 * A PgBouncer in transaction mode in front of either (startPrivatePgbouncer).
 *
 * Also: spawning the real server, built as `npm start` builds it, as a child process, for tests of
 * several instances and of shutdown.
 */
import { MISSING_PART, systemProgram } from './system-parts.ts';
import {
  execFileSync,
  spawn,
  spawnSync,
  type ChildProcessWithoutNullStreams,
} from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TAP } from 'tap';
import type { TestLike } from './app.ts';
import { freePort, spawnServer, type SpawnedServer } from './processes.ts';
import { deadline, waitUntil } from './wait.ts';

// ---------------------------------------------------------------------------------------
// PostgreSQL

/** The directory of initdb/pg_ctl: PG_BINDIR, else the newest /usr/lib/postgresql/N/bin. */
function postgresBinDir(): string | null {
  const candidates = [
    process.env.PG_BINDIR,
    ...listVersions().map((v) => `/usr/lib/postgresql/${v}/bin`),
  ];
  for (const dir of candidates)
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  return null;
}

function listVersions(): string[] {
  try {
    return readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  } catch {
    return [];
  }
}

function redisServerPath(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() ? found.stdout.trim() : null;
}

/** Why a private PostgreSQL cluster cannot run here, or null when it can. */
function privatePostgresMissing(): string | null {
  if (process.env.PRIVATE_SERVER_TESTS === 'skip')
    return 'PRIVATE_SERVER_TESTS=skip (.ci/run runs them in its first suite only)';
  if (!postgresBinDir())
    return `${MISSING_PART}: PostgreSQL server binaries (initdb, pg_ctl) not found: install postgresql or set PG_BINDIR`;
  return null;
}

/** Why the private servers cannot run here, or null when they can. */
export function privateServersMissing(): string | null {
  const postgres = privatePostgresMissing();
  if (postgres) return postgres;
  if (!redisServerPath())
    return `${MISSING_PART}: redis-server not found (apt-get install redis-server)`;
  return null;
}

export interface PrivatePostgres {
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  /** A URL to another database of this cluster. */
  urlOf(database: string): string;
  running: boolean;
  /**
   * pg_ctl stop: `fast` disconnects sessions and checkpoints; `immediate` is a crash (WAL recovery
   * on start).
   */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
}

function command(program: string, args: string[]): [string, string[]] {
  // initdb and postgres refuse to run as root: as root, run them as the postgres user.
  return process.getuid?.() === 0
    ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
    : [program, args];
}

/** Runs a PostgreSQL program to its end (blocking: setup and teardown only). */
function asPostgresSync(program: string, args: string[], timeoutMs = 60_000): void {
  const [cmd, cmdArgs] = command(program, args);
  const result = spawnSync(cmd, cmdArgs, { encoding: 'utf8', timeout: timeoutMs });
  if (result.status !== 0) {
    throw new Error(
      `${program} ${args.join(' ')} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}`,
    );
  }
}

/** The same without blocking the event loop (a server in this process keeps answering). */
function asPostgres(program: string, args: string[], timeoutMs = 60_000): Promise<void> {
  const [cmd, cmdArgs] = command(program, args);
  const child = spawn(cmd, cmdArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  const done = new Promise<void>((resolve, reject) => {
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${program} ${args.join(' ')} failed (${code ?? signal}): ${output}`));
    });
  });
  // Killed past the bound; its exit (by SIGKILL) then rejects with its output.
  return deadline(`${program} ${args.join(' ')}`, done, timeoutMs, () =>
    child.kill('SIGKILL'),
  ).catch(() => done);
}

/** A temporary directory the PostgreSQL programs may write (owned by postgres when root). */
function clusterDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'private-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  return dir;
}

/**
 * A cluster of its own, on a free port. initdb's trust pg_hba.conf admits replication
 * connections from 127.0.0.1, and wal_level, max_wal_senders and hot_standby are set for
 * streaming replicas (startPrivateStandby).
 */
export async function startPrivatePostgres(t: TestLike): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error(privateServersMissing() ?? 'no PostgreSQL');
  const dir = clusterDir();
  const data = join(dir, 'data');
  asPostgresSync(join(bin, 'initdb'), [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'postgres',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
  ]);
  return runCluster(t, bin, dir, data);
}

/**
 * A streaming replica (hot standby) of `primary`: pg_basebackup -R (which writes standby.signal
 * and primary_conninfo) into a directory of its own, started on a free port. Stopped and
 * removed in teardown like the primary.
 */
async function startPrivateStandby(
  t: TestLike,
  primary: PrivatePostgres,
): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error(privateServersMissing() ?? 'no PostgreSQL');
  const dir = clusterDir();
  const data = join(dir, 'data');
  await asPostgres(join(bin, 'pg_basebackup'), [
    '-D',
    data,
    '-R',
    '-X',
    'stream',
    '-c',
    'fast',
    '--no-sync',
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
  ]);
  return runCluster(t, bin, dir, data);
}

async function runCluster(
  t: TestLike,
  bin: string,
  dir: string,
  data: string,
): Promise<PrivatePostgres> {
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=100 -c shared_buffers=32MB -c fsync=on -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on`;
  const pg: PrivatePostgres = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    urlOf: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    running: false,
    async start() {
      await asPostgres(join(bin, 'pg_ctl'), [
        '-D',
        data,
        '-o',
        options,
        '-l',
        join(dir, 'server.log'),
        '-w',
        '-t',
        '60',
        'start',
      ]);
      pg.running = true;
    },
    async stop(mode = 'fast') {
      pg.running = false;
      await asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
    },
  };
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    try {
      // Whatever state the test left it in (stopped, running, starting).
      asPostgresSync(join(bin, 'pg_ctl'), [
        '-D',
        data,
        '-m',
        'immediate',
        '-w',
        '-t',
        '30',
        'stop',
      ]);
    } catch {
      // not running
    }
    rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(remove);
  // Also when the test process ends early (a failed assertion that throws, a timeout).
  process.once('exit', remove);
  await pg.start();
  return pg;
}

// ---------------------------------------------------------------------------------------
// Redis

export interface PrivateRedis {
  port: number;
  url: string;
  running: boolean;
  /** SIGKILL by default: the server vanishes as in a crash or a network cut. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
}

export async function startPrivateRedis(t: TestLike): Promise<PrivateRedis> {
  const server = redisServerPath();
  if (!server) throw new Error(privateServersMissing() ?? 'no redis-server');
  const port = await freePort();
  let child: ChildProcessWithoutNullStreams | null = null;
  const redis: PrivateRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    running: false,
    async start() {
      const proc = spawn(
        server,
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
        ],
        {
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      child = proc;
      let output = '';
      proc.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      proc.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await waitUntil(`redis-server on port ${port} (${output})`, () => {
        if (proc.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
        return /Ready to accept connections/.test(output);
      });
      redis.running = true;
    },
    async stop(signal: NodeJS.Signals = 'SIGKILL') {
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((done) => proc.once('exit', done));
      proc.kill(signal);
      await deadline('redis-server to exit', exited, 10_000).catch(() => {});
      redis.running = false;
    },
  };
  t.teardown(() => redis.stop('SIGKILL'));
  process.once('exit', () => child?.kill('SIGKILL'));
  await redis.start();
  return redis;
}

// ---------------------------------------------------------------------------------------
// PgBouncer

/** Why startPrivatePgbouncer cannot run here (requirePart's argument), or null. */
export function pgbouncerMissing(): string | null {
  return systemProgram('pgbouncer') ? null : 'pgbouncer not found (apt-get install pgbouncer)';
}

export interface PrivatePgbouncer {
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres, through the pooler. */
  url: string;
  /** A URL to another database of the cluster behind it, through the pooler. */
  urlOf(database: string): string;
  /** What PgBouncer logged so far. */
  output(): string;
}

/**
 * A PgBouncer child process in `pool_mode = transaction` on a free loopback port in front of
 * `postgres` (a private cluster, or any server on 127.0.0.1), every database passed through,
 * `poolSize` server connections per database and user (default_pool_size). Trust auth, as the
 * clusters here use: the auth file lists "postgres" with an empty password. Stopped in teardown.
 */
export async function startPrivatePgbouncer(
  t: TestLike,
  postgres: { port: number },
  options: { poolSize?: number } = {},
): Promise<PrivatePgbouncer> {
  const program = systemProgram('pgbouncer');
  if (!program) throw new Error(pgbouncerMissing()!);
  const dir = mkdtempSync(join(tmpdir(), 'private-pgbouncer-'));
  const port = await freePort();
  writeFileSync(join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=127.0.0.1 port=${postgres.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 500',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root: as root, it drops to the postgres user (-u).
  const args = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const child = spawn(program, [...args, join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  t.teardown(stop);
  process.once('exit', stop);
  await waitUntil(`pgbouncer on port ${port} (${output})`, () => {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${output}`);
    return /process up/.test(output);
  });
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    urlOf: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    output: () => output,
  };
}

// ---------------------------------------------------------------------------------------
// A test file's preamble

/**
 * Starts the private servers a test file needs, a PostgreSQL cluster (and a redis-server with
 * `{ redis: true }`), then runs the file's tests against them. Where they cannot run here, the
 * file reports one test, `name`, as skipped with the reason: a missing dependency shows as a
 * SKIP, never as a pass.
 */
export async function withPrivateServers(
  t: TAP,
  name: string,
  wanted: { redis: true },
  run: (pg: PrivatePostgres, redis: PrivateRedis) => Promise<void>,
): Promise<void>;
export async function withPrivateServers(
  t: TAP,
  name: string,
  wanted: { redis: false },
  run: (pg: PrivatePostgres) => Promise<void>,
): Promise<void>;
export async function withPrivateServers(
  t: TAP,
  name: string,
  wanted: { redis: boolean },
  run: (pg: PrivatePostgres, redis: PrivateRedis) => Promise<void>,
): Promise<void> {
  const missing = privateServersMissing();
  if (missing) {
    const needs = wanted.redis
      ? 'private PostgreSQL and Redis needed'
      : 'a private PostgreSQL is needed';
    t.test(name, { skip: `${needs}: ${missing}` }, () => {});
    return;
  }
  const pg = await startPrivatePostgres(t);
  const redis = wanted.redis ? await startPrivateRedis(t) : undefined;
  // Only the function of the `{ redis: true }` overload takes the second argument.
  await run(pg, redis as PrivateRedis);
}

/**
 * withPrivateServers for a primary and its streaming replica (no Redis): where PostgreSQL's
 * server binaries are missing, one test, `name`, is reported skipped with the reason.
 */
export async function withPrivateReplica(
  t: TAP,
  name: string,
  run: (primary: PrivatePostgres, standby: PrivatePostgres) => Promise<void>,
): Promise<void> {
  const missing = privatePostgresMissing();
  if (missing) {
    t.test(
      name,
      { skip: `a private PostgreSQL primary and replica are needed: ${missing}` },
      () => {},
    );
    return;
  }
  const primary = await startPrivatePostgres(t);
  const standby = await startPrivateStandby(t, primary);
  await run(primary, standby);
}

// ---------------------------------------------------------------------------------------
// The server process

export interface ServerProcess extends SpawnedServer {
  base: string;
  /** The JSON log lines (pino) printed so far. */
  logs(): Record<string, unknown>[];
  /** Resolves with the exit, or kills the process and throws after the timeout. */
  waitExit(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the built server (as `npm start` runs it) with `env` on a free port and waits until it
 * listens.
 */
export async function startServerProcess(
  t: TestLike,
  env: Record<string, string>,
  readyTimeoutMs = 60_000,
): Promise<ServerProcess> {
  const { child, port, stdout, stderr, exited } = await spawnServer({
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    // The database is the one `env` names: never a direct URL this process was given for another.
    DATABASE_DIRECT_URL: undefined,
    ...env,
    BASE_URL: undefined,
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  t.teardown(kill);
  process.once('exit', kill);
  const server: ServerProcess = {
    port,
    base: `http://127.0.0.1:${port}`,
    child,
    stdout,
    stderr,
    logs: () =>
      stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as Record<string, unknown>];
          } catch {
            return [];
          }
        }),
    exited,
    waitExit: (timeoutMs = 20_000) =>
      deadline('the process to exit', exited, timeoutMs, () => child.kill('SIGKILL')).catch(
        (err: Error) => {
          throw new Error(`${err.message}\n${stdout()}\n${stderr()}`);
        },
      ),
  };
  let gone = false;
  let how = '';
  void exited.then(({ code, signal }) => {
    gone = true;
    how = `code ${code}, signal ${signal}`;
  });
  await waitUntil(
    `the server on port ${port} to listen`,
    () => {
      if (gone)
        throw new Error(`server exited before listening (${how}):\n${stdout()}\n${stderr()}`);
      return /listening on http/.test(stdout());
    },
    { timeoutMs: readyTimeoutMs, everyMs: 100 },
  );
  return server;
}

/**
 * How long the server's close took, by its own 'shut down' line (src/server.ts); Infinity
 * without one. What SHUTDOWN_TIMEOUT_MS bounds is the close: the parent's clock adds the exit
 * itself, which on a busy CI machine took a second more (coverage is written on exit).
 */
export function closeTookMs(server: ServerProcess): number {
  const line = server.logs().find((l) => l.msg === 'shut down');
  return line ? Number(line.tookMs) : Infinity;
}
