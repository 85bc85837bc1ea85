/**
 * What `npm start` prints (issue #59 item 4; docs/operations.md, "Logs"): the built server, as
 * test/server/server.test.ts starts it, at the default LOG_LEVEL (info), on an embedded PGlite
 * directory of its own. The banner comes first; the start's housekeeping (migrations, partitions)
 * is one line after it, and Fastify's "Server listening" line is not there. In development with a
 * terminal (a real pseudo-terminal: util-linux `script`) each API request is one readable line
 * and the portal's assets none; through a pipe, or in production, the lines are JSON as ever.
 * With a PostgreSQL DATABASE_URL, a start on an empty database of its own counts its migrations.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { spawnServer, type SpawnedServer } from '../helpers/processes.ts';
import { requirePart, systemProgram } from '../helpers/system-parts.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';

// The terminal is a real pseudo-terminal: util-linux's script (Debian's bsdutils).
requirePart(t, systemProgram('script') ? null : 'script (apt-get install bsdutils)');

const parent = mkdtempSync(join(tmpdir(), 'start-output-'));
t.teardown(() => rmSync(parent, { recursive: true, force: true }));

const children: ChildProcessWithoutNullStreams[] = [];
t.teardown(() => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

async function start(
  dir: string,
  env: Record<string, string | undefined>,
  tty: boolean,
): Promise<SpawnedServer> {
  const server = await spawnServer(
    {
      PGLITE_DIR: join(parent, dir),
      LOG_LEVEL: undefined,
      DATABASE_URL: undefined,
      BASE_URL: undefined,
      SESSION_SECRET: undefined,
      NODE_ENV: undefined,
      ...env,
    },
    { tty },
  );
  children.push(server.child);
  return server;
}

/** The output so far, with a terminal's line endings made plain. */
const output = (server: SpawnedServer) => server.stdout().replace(/\r\n/g, '\n');

function waitFor(server: SpawnedServer, pattern: RegExp): Promise<RegExpMatchArray> {
  let exited = false;
  void server.exited.then(() => (exited = true));
  return waitUntil(
    `${pattern} in the output`,
    () => {
      if (exited) throw new Error(`the server exited before printing ${pattern}`);
      return pattern.exec(output(server));
    },
    { timeoutMs: 60_000, everyMs: 100 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${output(server)}${server.stderr()}`);
  });
}

async function stop(t: Test, server: SpawnedServer) {
  server.child.kill('SIGTERM');
  const exit = await deadline('the server to exit', server.exited, 30_000, () =>
    server.child.kill('SIGKILL'),
  );
  t.equal(exit.code, 0, 'and it stops on SIGTERM with exit 0');
}

const get = (server: SpawnedServer, path: string) =>
  fetch(`http://127.0.0.1:${server.port}${path}`, { signal: AbortSignal.timeout(10_000) }).then(
    async (res) => ({ status: res.status, body: await res.text() }),
  );

/** The output from its first non-blank line on: the banner must be that line. */
const fromFirstLine = (text: string) => text.replace(/^\s*\n/, '').split('\n');

const API = ['/api/v1/health?db=1', '/api/v1/listings?limit=1&api_key=secret-in-the-query'];
const ASSETS = ['/assets/portal.css', '/assets/portal.js', '/assets/icon.svg', '/favicon.ico'];
/** A page view: the page, its assets, then an API call whose line ends the wait. */
async function browse(t: Test, server: SpawnedServer) {
  t.equal((await get(server, '/portal')).status, 200);
  for (const path of ASSETS) t.equal((await get(server, path)).status, 200, `${path} served`);
  for (const path of API) t.equal((await get(server, path)).status, 200, `${path} answered`);
}

t.test('development at a terminal: the banner, one start-up line, readable lines', async (t) => {
  const server = await start('tty', {}, true);
  await waitFor(server, /^\d\d:\d\d:\d\d start-up: .*$/m);
  const lines = fromFirstLine(output(server));
  t.match(
    lines[0],
    /^Marketplace listings API listening on http:\/\/127\.0\.0\.1:\d+$/,
    'banner first',
  );
  const startup = lines.filter((line) => /start-up:/.test(line));
  t.equal(startup.length, 1, 'the housekeeping is one line');
  t.match(
    startup[0],
    /^\d\d:\d\d:\d\d start-up: \d+ migrations applied, \d+ partitions made ahead \(request_logs \d, webhook_events \d, .*\)$/,
    'naming the migrations applied and the partitions made per table',
  );
  t.ok(
    lines.indexOf(startup[0]!) > lines.findIndex((line) => /stop the server/.test(line)),
    'after the banner',
  );
  t.match(output(server), /health: {3}curl http:\/\/127\.0\.0\.1:\d+\/api\/v1\/health\?db=1/);
  t.notMatch(output(server), /partition made|Server listening|"level"/, 'no JSON, no repeats');

  await browse(t, server);
  const last = await waitFor(server, /^.* GET \/api\/v1\/listings\?.* 200 [\d.]+ ms$/m);
  t.match(
    last[0],
    /^\d\d:\d\d:\d\d GET \/api\/v1\/listings\?limit=1&api_key=REDACTED 200 [\d.]+ ms$/,
    'method, path with the secret query value redacted, status, milliseconds',
  );
  const after = output(server).slice(output(server).indexOf(startup[0]!) + startup[0]!.length);
  const requestLines = after.split('\n').filter((line) => line.trim());
  t.same(
    requestLines.map((line) => line.replace(/^\d\d:\d\d:\d\d /, '').replace(/ [\d.]+ ms$/, '')),
    [
      'GET /portal 200',
      'GET /api/v1/health?db=1 200',
      'GET /api/v1/listings?limit=1&api_key=REDACTED 200',
    ],
    'one line per request, none for the stylesheet, the script, the icon or the favicon',
  );
  t.notMatch(output(server), /secret-in-the-query/, 'the secret is not printed');

  const health = JSON.parse((await get(server, '/api/v1/health')).body) as { data: unknown };
  t.same(
    health.data,
    {
      ok: true,
      database: 'not_checked',
      session_secret: 'generated',
      db: null,
      config_ready: false,
    },
    'the health answer says the database was not checked and the secret was generated',
  );
  await stop(t, server);
});

t.test('a restart: no migration to apply, no repeat of the first run', async (t) => {
  const server = await start('tty', {}, true);
  const [line] = await waitFor(server, /^\d\d:\d\d:\d\d start-up: .*$/m);
  t.match(line, /start-up: no migration to apply, (no partition to make|\d+ partitions? made)/);
  t.notMatch(output(server), /First run/, 'and no new demo account');
  await stop(t, server);
});

t.test('through a pipe: the banner, then JSON lines as ever', async (t) => {
  const server = await start('pipe', {}, false);
  await waitFor(server, /"msg":"start-up: /);
  const lines = fromFirstLine(output(server));
  t.match(lines[0], /^Marketplace listings API listening on /, 'banner first');
  const json = lines.filter((line) => line.startsWith('{'));
  t.equal(json.length, 1, 'one JSON line before any request');
  t.match(JSON.parse(json[0]!), {
    level: 30,
    msg: /^start-up: \d+ migrations applied, 11 partitions/,
  });
  t.notMatch(output(server), /partition made|Server listening/);

  await browse(t, server);
  await waitFor(server, /"url":"\/api\/v1\/listings\?limit=1&api_key=REDACTED"/);
  const requests = 1 + ASSETS.length + API.length;
  const count = (msg: string) => output(server).split(`"msg":"${msg}"`).length - 1;
  await waitUntil('every request completed', () => count('request completed') === requests, {
    timeoutMs: 10_000,
    everyMs: 50,
  });
  t.equal(count('incoming request'), requests, 'each request its two JSON lines, assets too');
  await stop(t, server);
});

t.test('production at a terminal: JSON lines', async (t) => {
  const server = await start(
    'production',
    { NODE_ENV: 'production', SESSION_SECRET: 's'.repeat(40) },
    true,
  );
  await waitFor(server, /"msg":"start-up: /);
  t.equal((await get(server, '/api/v1/health')).status, 200);
  await waitFor(server, /"msg":"request completed"/);
  t.notMatch(output(server), /^\d\d:\d\d:\d\d /m, 'no readable lines');
  await stop(t, server);
});

t.test('on PostgreSQL: the migrations it applied, then none on a restart', async (t) => {
  if (!process.env.DATABASE_URL || process.env.DATABASE_URL === 'memory://') {
    t.pass('runs when DATABASE_URL names a PostgreSQL server');
    return;
  }
  // An empty database: the first start migrates it from nothing.
  const database = await freshDatabaseEnv(t, { empty: true });
  const first = await start('pg', database, false);
  const [line] = await waitFor(first, /"msg":"start-up: [^"]*"/);
  t.match(line, /start-up: \d+ migrations applied, \d+ partitions made ahead \(request_logs /);
  await stop(t, first);
  const again = await start('pg', database, false);
  const [next] = await waitFor(again, /"msg":"start-up: [^"]*"/);
  t.match(next, /start-up: no migration to apply, (no partition to make|\d+ partitions? made)/);
  await stop(t, again);
});
