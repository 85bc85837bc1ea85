/**
 * Debian's HAProxy (2.6) as a child process in front of server processes of a test, with the
 * health check and timings of docs/operations.md "Rolling restarts": HTTP mode, round-robin,
 * `GET /api/v1/health?db=1` every `inter`, `fall` failures to mark a server down, `rise`
 * successes to mark it up again. Its stats page (CSV) says what it thinks of each server.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestLike } from './app.ts';
import { freePort } from './processes.ts';
import { systemProgram } from './system-parts.ts';
import { waitUntil } from './wait.ts';

/** Why startHaproxy cannot run here (requirePart's argument), or null. */
export function haproxyMissing(): string | null {
  return systemProgram('haproxy') ? null : 'haproxy not found (apt-get install haproxy)';
}

export interface Haproxy {
  /** http://127.0.0.1:<port>, the balanced front. */
  base: string;
  /** Each server's status as HAProxy's stats report it (UP, DOWN, "UP 1/2", ...), by name. */
  states(): Promise<Record<string, string>>;
  output(): string;
}

/** The check's timings (milliseconds, counts), as in docs/operations.md "Rolling restarts". */
export const CHECK = { interMs: 500, fall: 2, rise: 2 } as const;

/** HAProxy on a free port balancing `servers` (name -> port on 127.0.0.1). Stopped in teardown. */
export async function startHaproxy(t: TestLike, servers: Record<string, number>): Promise<Haproxy> {
  const program = systemProgram('haproxy');
  if (!program) throw new Error(haproxyMissing()!);
  const dir = mkdtempSync(join(tmpdir(), 'haproxy-'));
  const port = await freePort();
  const statsPort = await freePort();
  const config = [
    'global',
    '  maxconn 2000',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 60s',
    // longer than a long poll's wait (30 s at most)
    '  timeout server 60s',
    '  timeout http-keep-alive 60s',
    // a slow answer under load is not a failed check: a draining server answers 503 at once
    '  timeout check 2s',
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend servers',
    'backend servers',
    '  balance roundrobin',
    '  option httpchk GET /api/v1/health?db=1',
    '  http-check expect status 200',
    `  default-server inter ${CHECK.interMs}ms fall ${CHECK.fall} rise ${CHECK.rise}`,
    ...Object.entries(servers).map(([name, p]) => `  server ${name} 127.0.0.1:${p} check`),
    'listen stats',
    `  bind 127.0.0.1:${statsPort}`,
    '  stats enable',
    '  stats uri /stats',
    '',
  ].join('\n');
  writeFileSync(join(dir, 'haproxy.cfg'), config);
  // -db: stay in the foreground, a child of this process.
  const child = spawn(program, ['-db', '-f', join(dir, 'haproxy.cfg')], {
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
  const states = async () => {
    const res = await fetch(`http://127.0.0.1:${statsPort}/stats;csv`);
    const [header, ...rows] = (await res.text()).split('\n').map((line) => line.split(','));
    const at = (name: string) => header!.indexOf(name);
    const found: Record<string, string> = {};
    for (const row of rows)
      if (row[at('# pxname')] === 'servers' && row[at('svname')] !== 'BACKEND')
        found[row[at('svname')]!] = row[at('status')]!;
    return found;
  };
  await waitUntil(`haproxy on port ${port} (${output})`, async () => {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${output}`);
    return states().then(
      (s) => Object.keys(s).length === Object.keys(servers).length,
      () => false,
    );
  });
  return { base: `http://127.0.0.1:${port}`, states, output: () => output };
}
