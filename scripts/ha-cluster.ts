/**
 * A high-availability PostgreSQL topology on loopback, as docs/operations.md "High availability"
 * describes it (issue #60 item 3): one etcd member (Debian's etcd-server), three PostgreSQL nodes
 * run by Patroni (Debian's patroni) with `synchronous_mode: true`, and HAProxy (Debian's haproxy)
 * in front with a primary port (`option httpchk GET /primary`) and a replica port (`GET /replica`).
 * Timings are short for tests (ttl 10, loop_wait 2, retry_timeout 4; HAProxy checks every 500 ms).
 *
 * As a module: `startHaCluster()` starts everything, waits until the cluster is healthy (a leader,
 * a synchronous standby, every member running, HAProxy routing both ports) and returns a handle
 * whose `stop()` stops everything it started; a failure while starting stops what was started.
 * As a command:
 *
 *   npm run ha -- up [--dir /tmp/ha-cluster] [--pg-port 5440] [--rest-port 8000]
 *     [--etcd-port 23790]
 *   npm run ha -- status [--dir ...]
 *   npm run ha -- down [--dir ...]
 *
 * `up` leaves the processes running (their ids in DIR/state.json) and prints the URLs; `down`
 * stops them and removes DIR. Ports: HAProxy's primary port is pg-port, its replica port pg-port+4,
 * the nodes pg-port+1..3; HAProxy's stats rest-port, Patroni's REST APIs rest-port+1..3; etcd's
 * client etcd-port, its peer etcd-port+1.
 *
 * PostgreSQL and Patroni refuse to run as root: as root, Patroni (and so PostgreSQL) runs as the
 * `postgres` user, and the data directories are that user's.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';

const PATRONI = '/usr/bin/patroni';
const PATRONICTL = '/usr/bin/patronictl';
const ETCD = '/usr/bin/etcd';
const HAPROXY = '/usr/sbin/haproxy';
const SCOPE = 'listings';
const NODES = ['pg1', 'pg2', 'pg3'] as const;
const RUNNING = new Set(['running', 'streaming']);

/** Patroni's DCS timings (the loop_wait + 2 * retry_timeout <= ttl rule holds). */
export const PATRONI_TIMINGS = { ttl: 10, loop_wait: 2, retry_timeout: 4 };
/**
 * HAProxy's health checks: every 500 ms (250 ms while a state changes), down after 2 failed
 * checks, up after 1: routing moves within about a second of Patroni's answer changing.
 */
export const HAPROXY_CHECKS = {
  inter: '500ms',
  fastinter: '250ms',
  downinter: '500ms',
  fall: 2,
  rise: 1,
};

export interface HaClusterOptions {
  /** Where the data directories, configuration and logs go (removed by stop()). */
  dir?: string;
  /** HAProxy's primary port; the replica port is +4, the nodes +1..+3. */
  pgPort?: number;
  /** HAProxy's stats page; Patroni's REST APIs +1..+3. */
  restPort?: number;
  /** etcd's client port; its peer port +1. */
  etcdPort?: number;
  /** Bound on the wait for a healthy cluster (ms). */
  readyTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface Member {
  name: string;
  role: string;
  state: string;
  host: string;
  port: number;
  timeline?: number;
  lag?: number | string;
}

export interface HaCluster {
  dir: string;
  /** postgres://postgres@127.0.0.1:<primary port>/postgres (HAProxy, to the leader). */
  primaryUrl: string;
  /** postgres://postgres@127.0.0.1:<replica port>/postgres (HAProxy, to the replicas). */
  replicaUrl: string;
  /** A URL of another database through the primary (or replica) port. */
  urlOf(database: string, port?: 'primary' | 'replica'): string;
  ports: { primary: number; replica: number; stats: number; etcd: number; nodes: number[] };
  /** The members as Patroni sees them (GET /cluster on any node that answers). */
  members(): Promise<Member[]>;
  /** The leader's name, once a member holds the leader lock and runs. */
  leader(): Promise<string | null>;
  /** kill -9 of the leader's postmaster; resolves with the node's name and when it was killed. */
  killPrimary(): Promise<{ node: string; at: number }>;
  /** `patronictl switchover` to a synchronous standby; resolves once patronictl has returned. */
  switchover(): Promise<{ from: string; to: string; at: number }>;
  /** Until a leader, a synchronous standby and every member run, and HAProxy routes both ports. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops everything it started and removes `dir`. */
  stop(): Promise<void>;
}

interface State {
  dir: string;
  pids: { name: string; pid: number }[];
  ports: HaCluster['ports'];
  restPorts: number[];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const asRoot = () => process.getuid?.() === 0;

function postgresIds(): { uid: number; gid: number } {
  const id = (flag: string) =>
    Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

function postgresBinDir(): string {
  for (const dir of [process.env.PG_BINDIR, '/usr/lib/postgresql/15/bin'])
    if (dir && existsSync(join(dir, 'pg_ctl'))) return dir;
  throw new Error('PostgreSQL 15 server binaries not found (apt-get install postgresql-15)');
}

/** Why the topology cannot run here (a program missing), or null. */
export function haClusterMissing(): string | null {
  const missing = [
    [PATRONI, 'patroni'],
    [ETCD, 'etcd-server'],
    [HAPROXY, 'haproxy'],
  ].filter(([path]) => !existsSync(path!));
  if (missing.length > 0)
    return `${missing.map(([, pkg]) => pkg).join(', ')} not installed (apt-get install patroni etcd-server haproxy)`;
  try {
    postgresBinDir();
  } catch (err) {
    return (err as Error).message;
  }
  return null;
}

function patroniConfig(
  name: string,
  index: number,
  dir: string,
  ports: HaCluster['ports'],
  restPort: number,
): string {
  const nodePort = ports.nodes[index]!;
  const data = join(dir, name);
  // JSON is YAML: no YAML writer needed.
  return JSON.stringify(
    {
      scope: SCOPE,
      name,
      log: { level: 'INFO' },
      restapi: { listen: `127.0.0.1:${restPort}`, connect_address: `127.0.0.1:${restPort}` },
      etcd3: { hosts: [`127.0.0.1:${ports.etcd}`] },
      bootstrap: {
        dcs: {
          ...PATRONI_TIMINGS,
          maximum_lag_on_failover: 1048576,
          // A crashed primary is failed over at once rather than restarted in place (300 s).
          primary_start_timeout: 0,
          synchronous_mode: true,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              wal_level: 'replica',
              hot_standby: 'on',
              wal_log_hints: 'on',
              max_connections: 200,
              max_wal_senders: 10,
              max_replication_slots: 10,
              shared_buffers: '32MB',
              wal_keep_size: '128MB',
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { locale: 'C' }, { 'auth-local': 'trust' }],
      },
      postgresql: {
        listen: `127.0.0.1:${nodePort}`,
        connect_address: `127.0.0.1:${nodePort}`,
        data_dir: data,
        bin_dir: postgresBinDir(),
        pgpass: join(dir, `${name}.pgpass`),
        authentication: {
          superuser: { username: 'postgres', password: 'postgres' },
          replication: { username: 'replicator', password: 'replicator' },
          rewind: { username: 'postgres', password: 'postgres' },
        },
        parameters: { unix_socket_directories: dir },
        pg_hba: [
          'local all all trust',
          'host all all 127.0.0.1/32 trust',
          'host replication all 127.0.0.1/32 trust',
        ],
      },
      tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
    },
    null,
    2,
  );
}

function haproxyConfig(ports: HaCluster['ports'], restPorts: number[]): string {
  const c = HAPROXY_CHECKS;
  const servers = (check: string) => [
    '  mode tcp',
    `  option httpchk GET ${check}`,
    '  http-check expect status 200',
    // A node marked down has its sessions closed at once (clients see the cut, not a silence).
    `  default-server inter ${c.inter} fastinter ${c.fastinter} downinter ${c.downinter} ` +
      `fall ${c.fall} rise ${c.rise} on-marked-down shutdown-sessions`,
    ...NODES.map(
      (name, i) => `  server ${name} 127.0.0.1:${ports.nodes[i]} check port ${restPorts[i]}`,
    ),
  ];
  return [
    'global',
    '  maxconn 2000',
    'defaults',
    '  mode tcp',
    '  retries 2',
    '  timeout connect 500ms',
    '  timeout check 1s',
    '  timeout client 30m',
    '  timeout server 30m',
    'listen stats',
    '  mode http',
    `  bind 127.0.0.1:${ports.stats}`,
    '  stats enable',
    '  stats uri /',
    'listen primary',
    `  bind 127.0.0.1:${ports.primary}`,
    ...servers('/primary'),
    'listen replicas',
    `  bind 127.0.0.1:${ports.replica}`,
    '  balance roundrobin',
    ...servers('/replica'),
    '',
  ].join('\n');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The postmaster's pid of a node's data directory (its postmaster.pid), or null. */
function postmasterPid(dir: string, node: string): number | null {
  try {
    const pid = Number(readFileSync(join(dir, node, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : null;
  } catch {
    return null;
  }
}

async function getJson<T>(url: string, timeoutMs = 1000): Promise<T | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return (await res.json()) as T;
  } catch {
    return null;
  }
}

/** Stops processes by id (their process groups: each was started as a group leader). */
async function stopPids(pids: State['pids'], dir: string): Promise<void> {
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        // gone
      }
    }
  };
  // Patroni first (it stops its PostgreSQL), then HAProxy and etcd.
  const order = [...pids].sort(
    (a, b) => Number(b.name.startsWith('pg')) - Number(a.name.startsWith('pg')),
  );
  for (const { pid } of order.filter((p) => p.name.startsWith('pg'))) signal(pid, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  const postmasters = () => NODES.map((n) => postmasterPid(dir, n)).filter((p) => p !== null);
  while (
    Date.now() < deadline &&
    (order.some((p) => p.name.startsWith('pg') && alive(p.pid)) || postmasters().length > 0)
  )
    await sleep(100);
  for (const pid of postmasters()) signal(pid, 'SIGKILL');
  for (const { pid } of order) signal(pid, 'SIGKILL');
  const gone = Date.now() + 5000;
  while (Date.now() < gone && order.some((p) => alive(p.pid))) await sleep(50);
}

function start(
  name: string,
  program: string,
  args: string[],
  dir: string,
  asPostgres: boolean,
): { name: string; pid: number } {
  const out = openSync(join(dir, `${name}.log`), 'a');
  const [cmd, cmdArgs] =
    asPostgres && asRoot()
      ? ['runuser', ['-u', 'postgres', '--', program, ...args]]
      : [program, args];
  // Its own process group (stopPids signals the group), detached so `npm run ha -- up` can leave.
  const child = spawn(cmd, cmdArgs, { detached: true, stdio: ['ignore', out, out], cwd: dir });
  child.unref();
  if (child.pid === undefined) throw new Error(`${program} did not start`);
  return { name, pid: child.pid };
}

function handle(state: State, log: (line: string) => void): HaCluster {
  const { dir, ports, restPorts } = state;
  const url = (port: number, database = 'postgres') =>
    `postgres://postgres@127.0.0.1:${port}/${database}`;
  const members = async (): Promise<Member[]> => {
    for (const port of restPorts) {
      const cluster = await getJson<{ members: Member[] }>(`http://127.0.0.1:${port}/cluster`);
      if (cluster?.members) return cluster.members;
    }
    return [];
  };
  const leader = async () =>
    (await members()).find((m) => m.role === 'leader' && m.state === 'running')?.name ?? null;
  /** The server HAProxy's `port` reaches answers, and whether it is in recovery. */
  const routed = async (port: number): Promise<boolean | null> => {
    const sql = postgres(url(port), {
      max: 1,
      connect_timeout: 1,
      idle_timeout: 1,
      onnotice: () => {},
    });
    try {
      const [row] = await sql<{ recovery: boolean }[]>`select pg_is_in_recovery() as recovery`;
      return row!.recovery;
    } catch {
      return null;
    } finally {
      await sql.end({ timeout: 1 });
    }
  };
  const cluster: HaCluster = {
    dir,
    primaryUrl: url(ports.primary),
    replicaUrl: url(ports.replica),
    urlOf: (database, port = 'primary') =>
      url(port === 'primary' ? ports.primary : ports.replica, database),
    ports,
    members,
    leader,
    async killPrimary() {
      const node = await leader();
      if (!node) throw new Error('no leader to kill');
      const pid = postmasterPid(dir, node);
      if (!pid) throw new Error(`no postmaster running for ${node}`);
      process.kill(pid, 'SIGKILL');
      const at = Date.now();
      log(`kill -9 of ${node}'s postmaster (pid ${pid})`);
      return { node, at };
    },
    async switchover() {
      const all = await members();
      const from = all.find((m) => m.role === 'leader')?.name;
      const to = all.find((m) => m.role === 'sync_standby' && RUNNING.has(m.state))?.name;
      if (!from || !to) throw new Error(`no leader and sync standby: ${JSON.stringify(all)}`);
      const at = Date.now();
      // Not spawnSync: the load of this process goes on meanwhile.
      const ran = await new Promise<{ status: number | null; output: string }>((resolve) => {
        const child = spawn(
          PATRONICTL,
          [
            '-c',
            join(dir, `${from}.yml`),
            'switchover',
            SCOPE,
            '--leader',
            from,
            '--candidate',
            to,
            '--force',
          ],
          { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 },
        );
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.on('close', (status) => resolve({ status, output }));
      });
      if (ran.status !== 0)
        throw new Error(`patronictl switchover failed (${ran.status}): ${ran.output}`);
      log(
        `patronictl switchover ${from} -> ${to}: ${/Successfully.*|Switched over.*/.exec(ran.output)?.[0] ?? 'done'}`,
      );
      return { from, to, at };
    },
    async waitHealthy(timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      let last = '';
      for (;;) {
        for (const p of state.pids)
          if (!alive(p.pid))
            throw new Error(`${p.name} exited: ${tail(join(dir, `${p.name}.log`))}`);
        const all = await members();
        last = JSON.stringify(all.map((m) => [m.name, m.role, m.state]));
        const healthy =
          all.length === NODES.length &&
          all.some((m) => m.role === 'leader' && m.state === 'running') &&
          // Patroni 3.0.2 says `running` of a replica (3.0.4+ says `streaming`).
          all.some((m) => m.role === 'sync_standby' && RUNNING.has(m.state)) &&
          all.every((m) => RUNNING.has(m.state)) &&
          (await routed(ports.primary)) === false &&
          (await routed(ports.replica)) === true;
        if (healthy) return;
        if (Date.now() > deadline)
          throw new Error(`the cluster was not healthy within ${timeoutMs} ms: ${last}`);
        await sleep(250);
      }
    },
    async stop() {
      await stopPids(state.pids, dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Starts the topology and waits until it is healthy; on failure stops what it started. */
export async function startHaCluster(options: HaClusterOptions = {}): Promise<HaCluster> {
  const missing = haClusterMissing();
  if (missing) throw new Error(missing);
  const log = options.log ?? ((line: string) => process.stderr.write(`[ha] ${line}\n`));
  const dir = options.dir ?? '/tmp/ha-cluster';
  const pgPort = options.pgPort ?? 5440;
  const restPort = options.restPort ?? 8000;
  const etcdPort = options.etcdPort ?? 23790;
  if (existsSync(join(dir, 'state.json')))
    throw new Error(
      `${dir}/state.json exists: a cluster runs there (npm run ha -- down --dir ${dir})`,
    );
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (asRoot()) {
    const { uid, gid } = postgresIds();
    chownSync(dir, uid, gid);
  }
  const ports: HaCluster['ports'] = {
    primary: pgPort,
    replica: pgPort + 4,
    stats: restPort,
    etcd: etcdPort,
    nodes: [pgPort + 1, pgPort + 2, pgPort + 3],
  };
  const restPorts = [restPort + 1, restPort + 2, restPort + 3];
  const state: State = { dir, pids: [], ports, restPorts };
  const cluster = handle(state, log);
  const save = () => writeFileSync(join(dir, 'state.json'), JSON.stringify(state, null, 2));
  const stopOnSignal = () => {
    void cluster.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    state.pids.push(
      start(
        'etcd',
        ETCD,
        [
          '--name=etcd1',
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
          `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
          `--listen-peer-urls=http://127.0.0.1:${etcdPort + 1}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPort + 1}`,
          `--initial-cluster=etcd1=http://127.0.0.1:${etcdPort + 1}`,
          '--initial-cluster-state=new',
          '--log-level=warn',
        ],
        dir,
        false,
      ),
    );
    save();
    const etcdDeadline = Date.now() + 30_000;
    while (!(await getJson(`http://127.0.0.1:${etcdPort}/health`))) {
      if (Date.now() > etcdDeadline || !alive(state.pids[0]!.pid))
        throw new Error(`etcd did not start: ${tail(join(dir, 'etcd.log'))}`);
      await sleep(100);
    }
    log(`etcd on 127.0.0.1:${etcdPort}`);
    writeFileSync(join(dir, 'haproxy.cfg'), haproxyConfig(ports, restPorts));
    state.pids.push(start('haproxy', HAPROXY, ['-db', '-f', join(dir, 'haproxy.cfg')], dir, false));
    save();
    for (const [i, name] of NODES.entries()) {
      const file = join(dir, `${name}.yml`);
      writeFileSync(file, patroniConfig(name, i, dir, ports, restPorts[i]!));
      if (asRoot()) {
        const { uid, gid } = postgresIds();
        chownSync(file, uid, gid);
      }
      state.pids.push(start(name, PATRONI, [file], dir, true));
      save();
      // The first bootstraps the cluster; the others clone it once it has a leader.
      if (i === 0) {
        const deadline = Date.now() + 60_000;
        while (!(await cluster.leader())) {
          if (Date.now() > deadline || !alive(state.pids[state.pids.length - 1]!.pid))
            throw new Error(`${name} did not bootstrap: ${tail(join(dir, `${name}.log`))}`);
          await sleep(200);
        }
      }
    }
    await cluster.waitHealthy(options.readyTimeoutMs ?? 120_000);
    log(
      `healthy: leader ${await cluster.leader()}, HAProxy primary ${ports.primary}, replicas ${ports.replica}`,
    );
    return cluster;
  } catch (err) {
    await cluster.stop().catch(() => {});
    throw err;
  } finally {
    process.removeListener('SIGINT', stopOnSignal);
    process.removeListener('SIGTERM', stopOnSignal);
  }
}

/** The cluster started by `npm run ha -- up` in `dir` (its state.json), or null. */
export function runningHaCluster(
  dir: string,
  log = (line: string) => console.error(line),
): HaCluster | null {
  try {
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as State;
    return handle(state, log);
  } catch {
    return null;
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const flags: Record<string, string> = {};
  for (let i = 0; i < rest.length; i += 2) flags[rest[i]!.replace(/^--/, '')] = rest[i + 1] ?? '';
  const dir = flags.dir ?? '/tmp/ha-cluster';
  const usage =
    'usage: npm run ha -- up|status|down [--dir DIR] [--pg-port N] [--rest-port N] [--etcd-port N]';
  if (command === 'up') {
    const cluster = await startHaCluster({
      dir,
      pgPort: flags['pg-port'] ? Number(flags['pg-port']) : undefined,
      restPort: flags['rest-port'] ? Number(flags['rest-port']) : undefined,
      etcdPort: flags['etcd-port'] ? Number(flags['etcd-port']) : undefined,
    });
    console.log(
      [
        `DATABASE_URL=${cluster.primaryUrl}`,
        `DATABASE_REPLICA_URL=${cluster.replicaUrl}`,
        `HAProxy stats: http://127.0.0.1:${cluster.ports.stats}/`,
        `stop it: npm run ha -- down --dir ${dir}`,
      ].join('\n'),
    );
    return 0;
  }
  const cluster = runningHaCluster(dir);
  if (command === 'status') {
    if (!cluster) {
      console.log(`no cluster in ${dir}`);
      return 1;
    }
    for (const m of await cluster.members())
      console.log(
        `${m.name}\t${m.role}\t${m.state}\t${m.host}:${m.port}\ttimeline ${m.timeline ?? '-'}\tlag ${m.lag ?? '-'}`,
      );
    return 0;
  }
  if (command === 'down') {
    if (cluster) await cluster.stop();
    else rmSync(dir, { recursive: true, force: true });
    console.log(`stopped (${dir} removed)`);
    return 0;
  }
  console.error(usage);
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exit(1);
    },
  );
}
