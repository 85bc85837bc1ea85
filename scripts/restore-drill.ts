/**
 * The restore drill (issue #60, item 6; docs/operations.md "Backups and restore"): continuous WAL
 * archiving and base backups with pgBackRest, and a restore to a point in time that finds every
 * write acknowledged before it and none made after it.
 *
 *  1. a PostgreSQL cluster of its own (initdb, under a temporary directory), archive_mode on,
 *     archive_command = pgbackrest archive-push; a pgBackRest stanza, `check`, a full backup;
 *  2. the server, built and started as `npm start` runs it, migrates the empty database; an
 *     account and a key are made with the admin CLI; writers create listings (each with its
 *     own Idempotency-Key), every acknowledged create recorded with its id, when it was sent and
 *     when its 201 came; a differential backup is taken while they write;
 *  3. the writers pause, the target time T is taken in the pause, and they write again;
 *  4. RPO: how long the last acknowledged write waited until its WAL segment was in the
 *     repository (archive_timeout bounds it);
 *  5. the server is stopped, PostgreSQL stopped (immediate: a crash) and its data directory
 *     wiped; `pgbackrest restore --type=time --target=T --target-action=promote`; PostgreSQL
 *     started; the server started on the restored database;
 *  6. checks: every create acknowledged before T is there, none sent after T is (a create in
 *     flight across T could be either: the pause leaves none), the server answers (health, a
 *     listing from before T, 404 for one from after, a new create).
 *
 * Prints progress on stderr and one JSON summary on stdout; exits 1 if a check fails.
 *
 * Usage: npm run drill:restore [-- --ports 5460-5479] [--keep]
 *   --ports FROM-TO  the loopback ports to take PostgreSQL's and the server's from
 *   --keep           leave the directory (data, repository, logs) in place and print it
 *
 * PostgreSQL and pgBackRest refuse to run as root: as root they run as the postgres user.
 * Needs PostgreSQL's server binaries (PG_BINDIR, else the newest /usr/lib/postgresql/N/bin)
 * and pgbackrest (Debian's package) on PATH or in /usr/bin.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STANZA = 'drill';
/** archive_timeout of the drill: the RPO bound it measures (production: docs/operations.md). */
const ARCHIVE_TIMEOUT_S = 5;
/** The writers' pause around T: no create is in flight across it. */
const PAUSE_MS = 300;

const args = process.argv.slice(2);
const keep = args.includes('--keep');
const portsArg = args.includes('--ports') ? args[args.indexOf('--ports') + 1] : undefined;
const range = /^(\d+)-(\d+)$/.exec(portsArg ?? '20000-32000');
if (!range) usage(`--ports wants FROM-TO, got ${portsArg}`);

function usage(message: string): never {
  process.stderr.write(
    `restore-drill: ${message}\nusage: npm run drill:restore [-- --ports FROM-TO] [--keep]\n`,
  );
  process.exit(2);
}

const log = (line: string) => process.stderr.write(`restore-drill: ${line}\n`);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const since = (start: number) => Math.round(performance.now() - start);

// ---------------------------------------------------------------------------------------
// Programs

function binDir(): string {
  const versions = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))
    : [];
  const candidates = [
    process.env.PG_BINDIR,
    ...versions.map((v) => `/usr/lib/postgresql/${v}/bin`),
  ];
  const found = candidates.find((dir) => dir && existsSync(path.join(dir, 'pg_ctl')));
  if (!found)
    throw new Error('PostgreSQL server binaries not found: install postgresql or set PG_BINDIR');
  return found;
}

function pgbackrestPath(): string {
  const found = spawnSync('sh', ['-c', 'command -v pgbackrest || ls /usr/bin/pgbackrest'], {
    encoding: 'utf8',
  });
  const program = found.stdout.trim().split('\n')[0];
  if (found.status !== 0 || !program)
    throw new Error('pgbackrest not found (apt-get install pgbackrest)');
  return program;
}

const asRoot = process.getuid?.() === 0;

/** Runs a PostgreSQL or pgBackRest program to its end, as postgres when root; its stdout. */
function run(program: string, programArgs: string[], timeoutMs = 120_000): string {
  const [cmd, cmdArgs] = asRoot
    ? ['runuser', ['-u', 'postgres', '--', program, ...programArgs]]
    : [program, programArgs];
  const result = spawnSync(cmd, cmdArgs, { encoding: 'utf8', timeout: timeoutMs, cwd: '/' });
  if (result.status !== 0)
    throw new Error(
      `${path.basename(program)} ${programArgs.join(' ')} failed (${result.status ?? result.signal}): ${result.stderr}${result.stdout}`,
    );
  return result.stdout;
}

/** The same without blocking the event loop (the writers in this process go on meanwhile). */
function runAsync(program: string, programArgs: string[]): Promise<string> {
  const [cmd, cmdArgs] = asRoot
    ? ['runuser', ['-u', 'postgres', '--', program, ...programArgs]]
    : [program, programArgs];
  const child = spawn(cmd, cmdArgs, { cwd: '/', stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) =>
    child.on('exit', (code, signal) =>
      code === 0
        ? resolve(stdout)
        : reject(
            new Error(
              `${path.basename(program)} ${programArgs.join(' ')} failed (${code ?? signal}): ${stderr}${stdout}`,
            ),
          ),
    ),
  );
}

function ownedByPostgres(dir: string): void {
  if (!asRoot) return;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(dir, uid, gid);
}

function canListen(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done(true)));
  });
}

const taken = new Set<number>();
async function freePort(): Promise<number> {
  const [from, to] = [Number(range![1]), Number(range![2])];
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (!taken.has(port) && (await canListen(port))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error(`no free port between ${from} and ${to}`);
}

async function until<T>(what: string, check: () => Promise<T> | T, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------------------
// The cluster and its repository

const dir = mkdtempSync(path.join(tmpdir(), 'drill-restore-'));
ownedByPostgres(dir);
const data = path.join(dir, 'data');
const repo = path.join(dir, 'repo');
for (const sub of [repo, path.join(dir, 'log'), path.join(dir, 'lock'), path.join(dir, 'spool')]) {
  mkdirSync(sub);
  ownedByPostgres(sub);
}
const bin = binDir();
const pgbackrest = pgbackrestPath();
const pgPort = await freePort();
const apiPort = await freePort();
const config = path.join(dir, 'pgbackrest.conf');
writeFileSync(
  config,
  [
    '[global]',
    `repo1-path=${repo}`,
    // Two full backups kept (and the differentials and WAL they need); older ones expire at
    // the next full backup.
    'repo1-retention-full=2',
    'compress-type=lz4',
    'start-fast=y',
    `log-path=${path.join(dir, 'log')}`,
    `lock-path=${path.join(dir, 'lock')}`,
    `spool-path=${path.join(dir, 'spool')}`,
    'log-level-console=warn',
    'log-level-file=info',
    '',
    `[${STANZA}]`,
    `pg1-path=${data}`,
    `pg1-port=${pgPort}`,
    `pg1-socket-path=${dir}`,
    '',
  ].join('\n'),
);
ownedByPostgres(config);
const backrestArgs = (command: string, extra: string[]) => [
  `--config=${config}`,
  `--stanza=${STANZA}`,
  ...extra,
  command,
];
const backrest = (command: string, extra: string[] = []) =>
  run(pgbackrest, backrestArgs(command, extra));

const pgCtl = (action: string[]) => run(path.join(bin, 'pg_ctl'), ['-D', data, ...action]);
const startPostgres = () =>
  pgCtl(['-l', path.join(dir, 'postgres.log'), '-w', '-t', '120', 'start']);

let server: ChildProcess | null = null;
function cleanUp(): void {
  server?.kill('SIGKILL');
  try {
    pgCtl(['-m', 'immediate', '-w', '-t', '30', 'stop']);
  } catch {
    // not running
  }
  if (keep) log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
process.once('exit', cleanUp);
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

const timings: Record<string, number> = {};
let clock = performance.now();
log(
  `PostgreSQL (${bin}) in ${data}, port ${pgPort}; pgBackRest ${run(pgbackrest, ['version']).trim()}`,
);
run(path.join(bin, 'initdb'), [
  '-D',
  data,
  '-A',
  'trust',
  '-U',
  'postgres',
  '-E',
  'UTF8',
  '--locale=C',
]);
appendFileSync(
  path.join(data, 'postgresql.conf'),
  [
    '',
    '# restore drill (scripts/restore-drill.ts)',
    `port = ${pgPort}`,
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'wal_level = replica',
    'archive_mode = on',
    `archive_command = '${pgbackrest} --config=${config} --stanza=${STANZA} archive-push %p'`,
    `archive_timeout = ${ARCHIVE_TIMEOUT_S}`,
    'max_wal_senders = 3',
    'shared_buffers = 32MB',
    '',
  ].join('\n'),
);
startPostgres();
backrest('stanza-create');
// check: archive_command works (a WAL switch, archived and found in the repository).
backrest('check');
backrest('backup', ['--type=full']);
timings.setupMs = since(clock);
log(`stanza created, archive checked, full backup taken (${timings.setupMs} ms)`);

// ---------------------------------------------------------------------------------------
// The service, writing

const databaseUrl = `postgres://postgres@127.0.0.1:${pgPort}/postgres`;
const outfile = path.join(root, 'dist', `drill-${process.pid}`, 'server.js');
process.once('exit', () => rmSync(path.dirname(outfile), { recursive: true, force: true }));
execFileSync(process.execPath, [path.join(root, 'scripts', 'build.mjs'), '--outfile', outfile], {
  cwd: root,
  stdio: ['ignore', 'ignore', 'inherit'],
});
const serviceEnv = {
  ...process.env,
  NODE_ENV: 'development',
  LOG_LEVEL: 'warn',
  DATABASE_URL: databaseUrl,
  DATABASE_DIRECT_URL: '',
  DATABASE_REPLICA_URL: '',
  REQUEST_LOG_DATABASE_URL: '',
  REDIS_URL: '',
  BASE_URL: '',
  PORT: String(apiPort),
  HOST: '127.0.0.1',
  RATE_LIMIT_MAX: '1000000',
  SESSION_SECRET: 'the restore drill session secret, 32 characters or more',
};
const api = `http://127.0.0.1:${apiPort}`;

/** Starts the built server and waits until it listens; ms it took. */
async function startServer(): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, ['--enable-source-maps', outfile], {
    cwd: root,
    env: serviceEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server = child;
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await until('the server to listen', () => {
    if (child.exitCode !== null) throw new Error(`the server exited:\n${output}`);
    return /listening on http/.test(output);
  });
  return since(started);
}

async function stopServer(): Promise<void> {
  const child = server;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
  server = null;
}

function admin(command: string[], env: Record<string, string> = {}): Record<string, string> {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/admin.ts', ...command], {
    cwd: root,
    env: { ...serviceEnv, ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return JSON.parse(out) as Record<string, string>;
}

clock = performance.now();
timings.firstStartMs = await startServer();
log(`the server migrated the database and listens (${timings.firstStartMs} ms)`);
const username = `drill_${randomUUID().slice(0, 8)}`;
admin(['user', 'create', '--username', username], { USER_PASSWORD: 'restore drill password 1' });
const app = admin(['app', 'create', '--owner', username, '--name', 'Restore drill']);
const { key } = admin(['key', 'create', '--app', app.id!, '--env', 'sandbox']);

interface Write {
  id: string;
  sentAt: number;
  ackedAt: number;
}
const writes: Write[] = [];
let refused = 0;

async function create(): Promise<void> {
  const sentAt = Date.now();
  const res = await fetch(`${api}/api/v1/listings`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: JSON.stringify({ title: `Drill listing ${writes.length}`, price_cents: 1000 }),
  });
  const ackedAt = Date.now();
  if (res.status !== 201) {
    refused += 1;
    log(`a create answered ${res.status}: ${await res.text()}`);
    return;
  }
  writes.push({ id: ((await res.json()) as { data: { id: string } }).data.id, sentAt, ackedAt });
}

/** `writers` loops creating listings for `ms`. */
async function write(ms: number, writers = 2): Promise<void> {
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (Date.now() < end) await create();
    }),
  );
}

// Writes, with a differential backup taken meanwhile (online, as in production).
const diff = (async () => {
  await until('the first writes', () => writes.length >= 20);
  const started = performance.now();
  await runAsync(pgbackrest, backrestArgs('backup', ['--type=diff']));
  timings.diffBackupMs = since(started);
})();
await write(3000);
await diff;
// The pause: nothing in flight; T in its middle (elapsed time is the subject here).
await sleep(PAUSE_MS);
const target = new Date();
await sleep(PAUSE_MS);
await write(2000);
const T = target.getTime();
const before = writes.filter((w) => w.ackedAt < T);
const after = writes.filter((w) => w.sentAt > T);
const across = writes.length - before.length - after.length;
log(
  `${writes.length} creates acknowledged: ${before.length} before T, ${after.length} after, ${across} across`,
);

// RPO: from the last acknowledged create until its WAL segment is archived.
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
const lastAck = Math.max(...writes.map((w) => w.ackedAt));
const [current] = await sql<{ wal: string }[]>`
  select pg_walfile_name(pg_current_wal_lsn()) as wal`;
const wal = current!.wal;
await until(
  `WAL ${wal} archived`,
  async () => {
    const [row] = await sql<{ last: string | null }[]>`
      select last_archived_wal as last from pg_stat_archiver`;
    return row!.last !== null && row!.last.slice(8) >= wal.slice(8);
  },
  ARCHIVE_TIMEOUT_S * 1000 + 30_000,
);
const rpoMs = Date.now() - lastAck;
await sql.end();
log(
  `RPO: the last acknowledged create was archived ${rpoMs} ms after its 201 (archive_timeout ${ARCHIVE_TIMEOUT_S} s)`,
);
const info = JSON.parse(backrest('info', ['--output=json']));
interface BackupInfo {
  label: string;
  type: string;
  info: { size: number; repository: { delta: number } };
}
// The database's size, and what the backup added to the repository (compressed).
const backups = (info[0].backup as BackupInfo[]).map((b) => ({
  label: b.label,
  type: b.type,
  databaseBytes: b.info.size,
  storedBytes: b.info.repository.delta,
}));

// ---------------------------------------------------------------------------------------
// The loss, and the restore to T

await stopServer();
pgCtl(['-m', 'immediate', '-w', '-t', '60', 'stop']);
clock = performance.now();
for (const entry of readdirSync(data))
  rmSync(path.join(data, entry), { recursive: true, force: true });
// PostgreSQL reads recovery_target_time in its timezone setting (UTC after initdb here); the
// offset makes it unambiguous.
const targetText = target.toISOString().replace('T', ' ').replace('Z', '+00');
let step = performance.now();
backrest('restore', ['--type=time', `--target=${targetText}`, '--target-action=promote']);
timings.restoreMs = since(step);
step = performance.now();
startPostgres();
const restored = postgres(databaseUrl, { max: 1, onnotice: () => {} });
await until('recovery to end and the cluster to be promoted', async () => {
  const [row] = await restored<{ recovering: boolean }[]>`select pg_is_in_recovery() as recovering`;
  return !row!.recovering;
});
timings.postgresRecoveryMs = since(step);
timings.serviceStartMs = await startServer();
const health = await fetch(`${api}/api/v1/health?db=1`);
timings.rtoMs = since(clock);
log(
  `restored to ${targetText}: pgbackrest restore ${timings.restoreMs} ms, recovery ${timings.postgresRecoveryMs} ms, ` +
    `the server ${timings.serviceStartMs} ms; answering ${timings.rtoMs} ms after the wipe`,
);

// ---------------------------------------------------------------------------------------
// Checks

const ids = (list: Write[]) => list.map((w) => w.id);
const [foundBefore] = await restored<{ count: string }[]>`
  select count(*) from listings where id = any(${ids(before)}::uuid[])`;
const [foundAfter] = await restored<{ count: string }[]>`
  select count(*) from listings where id = any(${ids(after)}::uuid[])`;
const [total] = await restored<{ count: string }[]>`select count(*) from listings`;
await restored.end();
const get = (id: string) =>
  fetch(`${api}/api/v1/listings/${id}`, { headers: { authorization: `Bearer ${key}` } }).then(
    (res) => res.status,
  );
const lastBefore = before.at(-1)!;
const firstAfter = after[0]!;
const answers = {
  health: health.status,
  listingBeforeT: await get(lastBefore.id),
  listingAfterT: await get(firstAfter.id),
  newCreate: await fetch(`${api}/api/v1/listings`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'idempotency-key': randomUUID(),
    },
    body: JSON.stringify({ title: 'After the restore', price_cents: 1000 }),
  }).then((res) => res.status),
};
await stopServer();

const summary = {
  target: target.toISOString(),
  boundary:
    'present: every create whose 201 came before T; absent: every create sent after T; ' +
    'a create in flight across T may be either (the pause around T leaves none)',
  creates: {
    acknowledged: writes.length,
    refused,
    beforeT: before.length,
    afterT: after.length,
    acrossT: across,
  },
  restored: {
    beforeTFound: Number(foundBefore!.count),
    afterTFound: Number(foundAfter!.count),
    listings: Number(total!.count),
  },
  answers,
  backups,
  archiveTimeoutS: ARCHIVE_TIMEOUT_S,
  rpoMs,
  timings,
};
const failures = [
  refused > 0 && `${refused} creates refused while writing`,
  before.length === 0 && 'no create before T',
  after.length === 0 && 'no create after T',
  summary.restored.beforeTFound !== before.length &&
    `${before.length - summary.restored.beforeTFound} creates acknowledged before T missing`,
  summary.restored.afterTFound !== 0 &&
    `${summary.restored.afterTFound} creates sent after T present`,
  answers.health !== 200 && `health answered ${answers.health}`,
  answers.listingBeforeT !== 200 && `a listing from before T answered ${answers.listingBeforeT}`,
  answers.listingAfterT !== 404 && `a listing from after T answered ${answers.listingAfterT}`,
  answers.newCreate !== 201 && `a create after the restore answered ${answers.newCreate}`,
].filter(Boolean);
process.stdout.write(
  `${JSON.stringify({ ok: failures.length === 0, failures, ...summary }, null, 2)}\n`,
);
if (failures.length > 0) {
  for (const failure of failures) log(`FAILED: ${failure}`);
  process.exit(1);
}
log('every create acknowledged before T is there, none sent after it');
process.exit(0);
