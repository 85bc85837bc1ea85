/**
 * Child processes of the benchmark: the servers, the load generator, and what is measured
 * from outside them (peak RSS from /proc, time to the first answered request).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const TSX = ['--import', 'tsx'];

/**
 * How `npm start` runs the built server: the node flags of package.json's `start` script, then
 * dist/server.js. Read from there, so the benchmark measures what operators run.
 */
export function startCommand(root: string): string[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const match = /\bnode((?: --[\w-]+(?:=\S+)?)*) dist\/server\.js/.exec(pkg.scripts.start ?? '');
  if (!match)
    throw new Error('package.json: the start script no longer runs node ... dist/server.js');
  return [...match[1]!.trim().split(' ').filter(Boolean), path.join(root, 'dist/server.js')];
}

export interface Server {
  name: string;
  child: ChildProcess;
  origin: string;
  /** The last lines the process wrote (for the error when it dies). */
  output(): string;
}

/** A free loopback port (listen on 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** `env` is laid over this process's environment; an undefined value removes the variable. */
export function startProcess(
  name: string,
  args: string[],
  env: Record<string, string | undefined>,
  port: number,
): Server {
  const merged: Record<string, string | undefined> = { ...process.env, ...env, PORT: String(port) };
  for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key];
  const child = spawn(process.execPath, args, {
    env: merged as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    tail.push(chunk.toString());
    if (tail.length > 40) tail.shift();
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { name, child, origin: `http://127.0.0.1:${port}`, output: () => tail.join('') };
}

/** Polls `path` until it answers 2xx; returns milliseconds since `since`. */
export async function waitForFirstResponse(
  server: Server,
  path: string,
  since: number,
  timeoutMs = 120_000,
): Promise<number> {
  const deadline = since + timeoutMs;
  while (performance.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      throw new Error(
        `${server.name} exited (${server.child.exitCode ?? server.child.signalCode}) before answering:\n${server.output()}`,
      );
    }
    try {
      const response = await fetch(server.origin + path, { signal: AbortSignal.timeout(2000) });
      await response.arrayBuffer();
      if (response.ok) return performance.now() - since;
    } catch {
      // not listening yet
    }
    await sleep(10);
  }
  throw new Error(
    `${server.name} did not answer ${path} within ${timeoutMs / 1000} s:\n${server.output()}`,
  );
}

/** SIGTERM, and wait for the exit (SIGKILL after `graceMs`). */
export async function stopProcess(server: Server, graceMs = 15_000): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Resident set size of a process in bytes (Linux /proc; null elsewhere). */
export function rssBytes(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * CPU time (user + system) a process has used, in seconds (Linux /proc; 0 if it is gone).
 * Clock ticks are 100 a second on Linux.
 */
export function cpuSeconds(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** CPU seconds used so far by every process with this command name (e.g. `postgres`). */
export function cpuSecondsOf(command: string): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === command)
        total += cpuSeconds(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak in bytes. */
export function sampleRss(pid: number, everyMs = 50): { stop(): number | null } {
  let peak: number | null = rssBytes(pid);
  const timer = setInterval(() => {
    const value = rssBytes(pid);
    if (value !== null && (peak === null || value > peak)) peak = value;
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      const last = rssBytes(pid);
      if (last !== null && (peak === null || last > peak)) peak = last;
      return peak;
    },
  };
}

/** Runs the load generator in its own process; resolves with its one JSON line. */
export function runInChild<T>(script: string, args: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...TSX, script, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${script} exited ${code}: ${err.trim()}`));
      const line = out.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line) as T);
      } catch {
        reject(new Error(`${script} printed no result: ${out}${err}`));
      }
    });
  });
}

/** Polls `check` every `intervalMs` until it holds; throws after `timeoutMs`. */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Runs a command's `main` and exits with its code; a failure is printed, stack and all: exit 1. */
export function runMain(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(
        `${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
}

/** An API answer: its status, its JSON body (`{}` when empty) and when it arrived (Date.now()). */
export interface ApiAnswer {
  status: number;
  body: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  at: number;
}

/** One request to the API under test with a bearer credential (a JSON body when given). */
export async function callApi(
  api: Server,
  method: string,
  pathname: string,
  key: string,
  body?: unknown,
): Promise<ApiAnswer> {
  const response = await fetch(api.origin + pathname, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {}, at: Date.now() };
}
