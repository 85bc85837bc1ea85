/**
 * The real server process, built and run as `npm start` does (scripts/build.mjs, then
 * dist/server.js), on an embedded PGlite directory: the first-run
 * banner and demo key, the single-process lock, graceful shutdown on SIGTERM, and a restart
 * that keeps the data. Every child is bounded by timeouts and killed in teardown.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { spawnServer, type SpawnedServer } from '../helpers/processes.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';

const parent = mkdtempSync(join(tmpdir(), 'server-test-'));
const PGLITE_DIR = join(parent, 'db');
t.teardown(() => rmSync(parent, { recursive: true, force: true }));

type Server = SpawnedServer;

const children: ChildProcessWithoutNullStreams[] = [];
t.teardown(() => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

async function startServer(): Promise<Server> {
  const server = await spawnServer({
    PGLITE_DIR,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATABASE_URL: undefined,
    BASE_URL: undefined,
    SESSION_SECRET: undefined,
  });
  children.push(server.child);
  return server;
}

/** Resolves once the output matches, or rejects on exit or after the timeout. */
function waitFor(server: Server, pattern: RegExp, timeoutMs = 40_000): Promise<RegExpMatchArray> {
  let exited = false;
  void server.exited.then(() => (exited = true));
  return waitUntil(
    `${pattern} in the output`,
    () => {
      if (exited) throw new Error(`server exited before printing ${pattern}`);
      return pattern.exec(server.stdout());
    },
    { timeoutMs, everyMs: 100 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${server.stdout()}${server.stderr()}`);
  });
}

/** Resolves with the exit, or kills the child and fails after the timeout. */
const waitExit = (
  server: Server,
  timeoutMs = 20_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> =>
  deadline('the process to exit', server.exited, timeoutMs, () => server.child.kill('SIGKILL'));

const get = (port: number, path: string, key?: string) =>
  fetch(`http://127.0.0.1:${port}${path}`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    signal: AbortSignal.timeout(10_000),
  });

let demoKey = '';

t.test('first start on an empty embedded database', async (t) => {
  const server = await startServer();
  const [, url] = await waitFor(server, /listening on (http:\/\/\S+)/);
  t.equal(url, `http://127.0.0.1:${server.port}`, 'prints its URL');
  const [, key] = await waitFor(server, /sandbox key (svc_sandbox_[A-Za-z0-9_-]+)/);
  t.match(key, /^svc_sandbox_[A-Za-z0-9_-]{32,}$/, 'prints a demo sandbox key');
  demoKey = key!;
  t.match(server.stdout(), /username demo/);
  t.match(
    server.stdout(),
    new RegExp(`curl -H "Authorization: Bearer ${demoKey}" ${url}/api/v1/me`),
    'with a curl line to try',
  );

  const me = await get(server.port, '/api/v1/me', demoKey);
  t.equal(me.status, 200);
  const body = (await me.json()) as { data: { username: string }; meta: { environment: string } };
  t.equal(body.data.username, 'demo');
  t.equal(body.meta.environment, 'sandbox');
  t.equal(me.headers.get('x-request-id') !== null, true);

  const health = await get(server.port, '/api/v1/health?db=1');
  t.equal(health.status, 200);
  t.match(await health.json(), { data: { ok: true, db: true } });

  t.test('a second server on the same directory is refused, naming the lock', async (t) => {
    const second = await startServer();
    const exit = await waitExit(second, 40_000);
    t.not(exit.code, 0, 'exits non-zero');
    t.equal(exit.code === null, false, 'exits by itself, not by a signal');
    t.match(
      second.stderr(),
      new RegExp(
        `embedded database at ${PGLITE_DIR.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use by another process \\(pid ${server.child.pid}\\)`,
      ),
    );
    t.match(second.stderr(), /DATABASE_URL/, 'says how to run several processes');
    t.notMatch(second.stdout(), /listening on/);
    t.notMatch(second.stderr(), /\n\s+at /, 'one clear message, no stack trace');

    const stillUp = await get(server.port, '/api/v1/me', demoKey);
    t.equal(stillUp.status, 200, 'the first server is unaffected');
  });

  t.test('SIGTERM shuts down gracefully with exit 0', async (t) => {
    server.child.kill('SIGTERM');
    const exit = await waitExit(server);
    t.same(exit, { code: 0, signal: null });
  });
});

t.test('a restart on the same directory keeps the data and prints no new key', async (t) => {
  t.ok(demoKey, 'the first start printed a key');
  const server = await startServer();
  await waitFor(server, /listening on http:\/\/\S+/);
  // The banner is written in one piece: once the URL is there, the rest is too.
  await waitFor(server, /stop the server/);
  t.notMatch(server.stdout(), /svc_sandbox_/, 'no key printed');
  t.notMatch(server.stdout(), /First run/);

  const me = await get(server.port, '/api/v1/me', demoKey);
  t.equal(me.status, 200, 'the key from the first run still works');
  t.equal(((await me.json()) as { data: { username: string } }).data.username, 'demo');

  server.child.kill('SIGTERM');
  t.same(await waitExit(server), { code: 0, signal: null });
});
