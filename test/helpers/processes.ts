/**
 * Child processes of tests: a free loopback port to start them on, and the server built as
 * `npm start` builds and runs it (scripts/build.mjs, then node on the bundle).
 */
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemProgram } from './system-parts.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/**
 * Below Linux's ephemeral range (32768-60999), where outgoing connections take their ports.
 * TEST_PORTS=FROM-TO confines a run to a range of its own (a machine shared with other runs).
 */
const PORTS = (() => {
  const range = /^(\d+)-(\d+)$/.exec(process.env.TEST_PORTS ?? '');
  return range
    ? { from: Number(range[1]), to: Number(range[2]) + 1 }
    : { from: 20_000, to: 32_000 };
})();

function canListen(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done(true)));
  });
}

/**
 * A loopback port that was free a moment ago, for a server that must know its port before it
 * starts. Picked at random below the ephemeral range: a port the OS hands out for listen(0)
 * can be taken by any outgoing connection (a database client's, another test's) before the
 * server binds it, which made starts fail with EADDRINUSE under load.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = PORTS.from + Math.floor(Math.random() * (PORTS.to - PORTS.from));
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port found between ${PORTS.from} and ${PORTS.to}`);
}

let built: string | undefined;

/**
 * `node` arguments that start the server as `npm start` does: bundled by scripts/build.mjs, run
 * with source maps. Each test process builds its own copy under dist/ (built once, removed at
 * exit), so test files running in parallel never start a bundle another one is rewriting.
 */
function serverCommand(): string[] {
  if (built === undefined) {
    const outfile = join(ROOT, 'dist', `test-${process.pid}`, 'server.js');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--outfile', outfile], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    process.once('exit', () =>
      rmSync(join(ROOT, 'dist', `test-${process.pid}`), { recursive: true, force: true }),
    );
    built = outfile;
  }
  return ['--enable-source-maps', built];
}

export interface SpawnedServer {
  child: ChildProcessWithoutNullStreams;
  port: number;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the built server (serverCommand) on a free loopback port (or `env.PORT`), with `env`
 * laid over this process's environment (an undefined value removes the variable), collecting its
 * output.
 * Waiting for it to listen and killing it are the caller's.
 */
export async function spawnServer(
  env: Record<string, string | undefined>,
  /**
   * tty: its stdout a terminal, as `npm start` in a shell has: run under util-linux's
   * `script -qfec` (a pseudo-terminal; its output, with the terminal's \r\n, is what script
   * relays). `child` is then script, which passes SIGTERM on to the server and exits with it.
   */
  { tty = false }: { tty?: boolean } = {},
): Promise<SpawnedServer> {
  // Built first: the port must be taken as soon as possible after it was found free.
  const command = serverCommand();
  // A PORT of the caller's: a server started again where a load balancer expects it.
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const merged: Record<string, string | undefined> = {
    ...process.env,
    ...env,
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  for (const name of Object.keys(merged)) if (merged[name] === undefined) delete merged[name];
  const quoted = [process.execPath, ...command].map((word) => `'${word}'`).join(' ');
  const child = tty
    ? spawn(systemProgram('script') ?? 'script', ['-qfec', `exec ${quoted}`, '/dev/null'], {
        cwd: ROOT,
        env: merged as NodeJS.ProcessEnv,
      })
    : spawn(process.execPath, command, { cwd: ROOT, env: merged as NodeJS.ProcessEnv });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.on('exit', (code, signal) => done({ code, signal })),
  );
  return { child, port, stdout: () => stdout, stderr: () => stderr, exited };
}

/** What a finished command printed, and how it exited. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Everything it printed, for an assertion's message. */
export const said = (ran: Ran) => `${ran.stdout}${ran.stderr}`.trim();

/**
 * Runs a command to its end in `cwd`, as a consumer's shell would: NODE_OPTIONS cleared (tap runs
 * tests with tsx, a consumer's node has no loader), the test CA by absolute path (the command
 * runs elsewhere; it trusts the tests' HTTPS receiver), no colours, `env` laid over the rest.
 */
export function runCommand(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<Ran> {
  return new Promise<Ran>((done, fail) => {
    const child = spawn(command, args, {
      cwd,
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        NO_COLOR: '1',
        NODE_EXTRA_CA_CERTS: join(ROOT, 'test/fixtures/tls/ca.pem'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}
