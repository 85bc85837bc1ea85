/**
 * The admin CLI as docs/cli.md describes it: exactly one JSON object on stdout and exit 0,
 * or { error: { code, message } } on stderr, nothing on stdout and a non-zero exit.
 * Most cases call runAdmin (the same code path as the command) against a database that
 * persists between calls; a few spawn the real `npm run --silent admin -- ...`.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import t, { type Test } from 'tap';
import { buildApp } from '../../src/app.ts';
import { COMMANDS, runAdmin, type CliResult } from '../../src/cli/admin.ts';
import { loadConfig } from '../../src/config.ts';
import { apiKeys, appClientSecrets } from '../../src/db/schema.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { bearer } from '../helpers/accounts.ts';
import { deadline } from '../helpers/wait.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * One database for the whole file, persisting between CLI calls: a fresh PostgreSQL
 * database when DATABASE_URL is a postgres URL, else an embedded PGlite directory.
 */
async function databaseEnv(): Promise<Record<string, string>> {
  const database = await freshDatabaseEnv(t);
  if (database.DATABASE_URL !== 'memory://') return { NODE_ENV: 'test', ...database };
  const parent = mkdtempSync(join(tmpdir(), 'admin-cli-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  return { NODE_ENV: 'test', PGLITE_DIR: join(parent, 'db') };
}

const env = await databaseEnv();
const admin = (...argv: string[]) => runAdmin(argv, env);

/** The real command, as an operator or a script runs it. */
/** The real command, in its own process; `input` is written to its standard input. */
function spawnAdmin(argv: string[], input?: string): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const child = spawn('npm', ['run', '--silent', 'admin', '--', ...argv], {
    cwd: ROOT,
    env: childEnv,
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  child.stdin?.end(input);
  const finished = new Promise<CliResult>((done, fail) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code: code ?? -1, stdout, stderr }));
  });
  // Killed past 2 minutes: it then closes with code -1 and the checks say so.
  return deadline('npm run admin', finished, 120_000, () => child.kill('SIGKILL')).catch(
    () => finished,
  );
}

type Json = Record<string, unknown>;

/** Success: exit 0, exactly one JSON object on stdout, nothing on stderr. */
function ok(t: Test, result: CliResult): Json {
  t.equal(result.code, 0, `exit 0 (stderr: ${result.stderr.trim()})`);
  t.equal(result.stderr, '', 'nothing on stderr');
  const lines = result.stdout.trim().split('\n');
  t.equal(lines.length, 1, 'one line on stdout');
  const parsed = JSON.parse(result.stdout) as unknown;
  t.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'a JSON object');
  return parsed as Json;
}

/** Failure: non-zero exit, empty stdout, { error: { code, message } } on stderr. */
function failed(
  t: Test,
  result: CliResult,
  code?: string | RegExp,
  message?: RegExp,
): { code: string; message: string } {
  t.not(result.code, 0, 'non-zero exit');
  t.equal(result.stdout, '', 'nothing on stdout');
  const lines = result.stderr.trim().split('\n');
  t.equal(lines.length, 1, 'one line on stderr');
  const body = JSON.parse(result.stderr) as { error: { code: string; message: string } };
  t.same(Object.keys(body), ['error']);
  t.same(Object.keys(body.error).sort(), ['code', 'message']);
  t.type(body.error.code, 'string');
  t.ok(body.error.message.length > 0, 'a message');
  if (code !== undefined) t.match(body.error.code, code);
  if (message !== undefined) t.match(body.error.message, message);
  t.notMatch(result.stderr, /\n\s+at |node_modules/, 'no stack trace');
  return body.error;
}

/** The app on the CLI's database (on PGlite the CLI has closed the directory by now). */
async function withApp<T>(work: (app: FastifyInstance) => Promise<T>): Promise<T> {
  const app = await buildApp(loadConfig(env));
  try {
    return await work(app);
  } finally {
    await app.close();
  }
}

// State shared by the cases below, in order.
let userId = '';
let appId = '';
let sandboxKey = { id: '', key: '' };
let readOnlyKey = { id: '', key: '' };
let liveKey = { id: '', key: '' };
let firstSecret = '';
let secondSecret = '';

t.test('user create (the real command) prints { id, username }', async (t) => {
  // The password on standard input, not in the process arguments (docs/cli.md).
  const out = ok(
    t,
    await spawnAdmin(
      [
        'user',
        'create',
        '--username',
        'ana',
        '--password',
        '-',
        '--display-name',
        'Ana B',
        '--email',
        'ana@example.com',
      ],
      'a long passphrase\n',
    ),
  );
  t.same(Object.keys(out).sort(), ['id', 'username']);
  t.match(out.id, UUID);
  t.equal(out.username, 'ana');
  userId = out.id as string;

  const minimal = ok(
    t,
    await admin('user', 'create', '--username', 'bob_2', '--password', 'another passphrase'),
  );
  t.equal(minimal.username, 'bob_2');
  t.match(minimal.id, UUID);
});

t.test('app create with repeated --redirect-uri prints { id, name, owner }', async (t) => {
  const out = ok(
    t,
    await admin(
      'app',
      'create',
      '--owner',
      'ana',
      '--name',
      "Ana's shop sync",
      '--redirect-uri',
      'https://shop.example.com/callback',
      '--redirect-uri',
      'http://localhost:8080/cb',
    ),
  );
  t.same(Object.keys(out).sort(), ['id', 'name', 'owner']);
  t.match(out.id, UUID);
  t.equal(out.name, "Ana's shop sync");
  t.equal(out.owner, 'ana');
  appId = out.id as string;
});

t.test('app show prints the app with redirect URIs, approval and milestones', async (t) => {
  const out = ok(t, await admin('app', 'show', '--app', appId));
  t.same(Object.keys(out).sort(), [
    'id',
    'milestones',
    'name',
    'owner',
    'production_approved',
    'redirect_uris',
  ]);
  t.equal(out.id, appId);
  t.equal(out.name, "Ana's shop sync");
  t.equal(out.owner, 'ana');
  t.same([...(out.redirect_uris as string[])].sort(), [
    'http://localhost:8080/cb',
    'https://shop.example.com/callback',
  ]);
  t.equal(out.production_approved, false);
  t.same(out.milestones, { sandbox_listing: { done: false, completed_at: null } });
});

t.test('app usage prints the usage figures of the Overview (no requests yet)', async (t) => {
  const hours = ok(t, await admin('app', 'usage', '--app', appId));
  t.same(Object.keys(hours).sort(), ['bars', 'environment', 'from', 'to', 'totals', 'unit']);
  t.equal(hours.environment, 'sandbox');
  t.equal(hours.unit, 'hour');
  const bars = hours.bars as { start: string; requests: number; p95_ms: number | null }[];
  t.equal(bars.length, 24, 'the last 24 hours');
  t.match(bars[0]!.start, ISO);
  t.ok(bars.every((b) => b.requests === 0 && b.p95_ms === null));
  t.same(hours.totals, {
    requests: 0,
    long_polls: 0,
    outcomes: { '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0 },
    errors: 0,
    error_rate: null,
    p50_ms: null,
    p95_ms: null,
  });
  const days = ok(t, await admin('app', 'usage', '--app', appId, '--env', 'live', '--days', '14'));
  t.equal(days.environment, 'live');
  t.equal(days.unit, 'day');
  t.equal((days.bars as unknown[]).length, 14);
  failed(
    t,
    await admin('app', 'usage', '--app', appId, '--days', '15'),
    'validation_error',
    /from 1 \(the last 24 hours\) to 14/,
  );
  failed(t, await admin('app', 'usage', '--app', appId, '--env', 'staging'), 'validation_error');
});

t.test(
  'app secret creates, then rotates, the client secret (shown once, stored hashed)',
  async (t) => {
    const first = ok(t, await admin('app', 'secret', '--app', appId));
    t.same(Object.keys(first).sort(), ['client_id', 'client_secret']);
    t.equal(first.client_id, appId);
    t.match(first.client_secret, /^svc_cs_[A-Za-z0-9_-]{32,}$/);
    firstSecret = first.client_secret as string;

    const second = ok(t, await admin('app', 'secret', '--app', appId));
    t.equal(second.client_id, appId);
    t.match(second.client_secret, /^svc_cs_[A-Za-z0-9_-]{32,}$/);
    t.not(second.client_secret, firstSecret, 'a new secret');
    secondSecret = second.client_secret as string;
  },
);

t.test('app approve prints { id, production_approved: true }', async (t) => {
  t.same(ok(t, await admin('app', 'approve', '--app', appId)), {
    id: appId,
    production_approved: true,
  });
  t.equal(ok(t, await admin('app', 'show', '--app', appId)).production_approved, true);
});

t.test('key create sandbox: svc_sandbox_ key with the default scopes', async (t) => {
  const out = ok(t, await admin('key', 'create', '--app', appId, '--env', 'sandbox'));
  t.same(Object.keys(out).sort(), ['env', 'id', 'key', 'scopes']);
  t.match(out.id, UUID);
  t.match(out.key, /^svc_sandbox_[A-Za-z0-9_-]{32,}$/);
  t.equal(out.env, 'sandbox');
  t.same(out.scopes, ['read', 'listings:write']);
  sandboxKey = { id: out.id as string, key: out.key as string };

  const readOnly = ok(
    t,
    await admin('key', 'create', '--app', appId, '--env', 'sandbox', '--scopes', 'read'),
  );
  t.match(readOnly.key, /^svc_sandbox_[A-Za-z0-9_-]{32,}$/);
  t.same(readOnly.scopes, ['read']);
  t.not(readOnly.key, sandboxKey.key);
  readOnlyKey = { id: readOnly.id as string, key: readOnly.key as string };

  const explicit = ok(
    t,
    await admin(
      'key',
      'create',
      '--app',
      appId,
      '--env',
      'sandbox',
      '--scopes',
      'read listings:write',
    ),
  );
  t.same(explicit.scopes, ['read', 'listings:write']);
});

t.test('key create live is refused before the sandbox_listing milestone', async (t) => {
  failed(
    t,
    await admin('key', 'create', '--app', appId, '--env', 'live'),
    'forbidden',
    /sandbox_listing/,
  );
});

t.test('acceptance: a CLI sandbox key gets its owner profile from GET /api/v1/me', async (t) => {
  await withApp(async (app) => {
    const me = await app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: bearer(sandboxKey.key),
    });
    t.equal(me.statusCode, 200);
    const body = me.json();
    t.equal(body.data.id, userId);
    t.equal(body.data.username, 'ana');
    t.equal(body.data.display_name, 'Ana B');
    t.equal(body.data.email, 'ana@example.com');
    t.equal(body.meta.environment, 'sandbox');

    // Keys and client secrets are stored only as hashes: no column holds the plaintext.
    const keyRows = await app.db.select().from(apiKeys);
    t.ok(keyRows.length >= 3);
    const stored = JSON.stringify(keyRows);
    for (const key of [sandboxKey.key, readOnlyKey.key]) {
      t.notOk(stored.includes(key), 'plaintext key is not stored');
      t.notOk(stored.includes(key.slice('svc_sandbox_'.length)), 'nor its random part');
    }
    const mine = keyRows.find((row) => row.id === sandboxKey.id);
    t.ok(mine, 'the key row exists');
    t.not(mine?.keyHash, sandboxKey.key);

    // Rotation left exactly one active secret, whose hash differs from the revoked one's.
    const secrets = await app.db
      .select()
      .from(appClientSecrets)
      .where(eq(appClientSecrets.appId, appId));
    t.equal(secrets.length, 2, 'two secrets issued');
    const active = secrets.filter((row) => row.revokedAt === null);
    const revoked = secrets.filter((row) => row.revokedAt !== null);
    t.equal(active.length, 1, 'one active secret');
    t.equal(revoked.length, 1, 'the old one revoked');
    t.not(active[0]?.secretHash, revoked[0]?.secretHash, 'the stored hash changed');
    const storedSecrets = JSON.stringify(secrets);
    t.notOk(storedSecrets.includes(firstSecret.slice('svc_cs_'.length)), 'first secret not stored');
    t.notOk(
      storedSecrets.includes(secondSecret.slice('svc_cs_'.length)),
      'second secret not stored',
    );

    // A key with only `read` reads but cannot write; the default key writes, which
    // completes the sandbox_listing milestone.
    const readOnlyMe = await app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: bearer(readOnlyKey.key),
    });
    t.equal(readOnlyMe.statusCode, 200);
    const denied = await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      headers: bearer(readOnlyKey.key),
      payload: { title: 'Denim jacket', price_cents: 4500 },
    });
    t.equal(denied.statusCode, 403);
    t.equal(denied.json().error.code, 'forbidden');

    const created = await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      headers: bearer(sandboxKey.key),
      payload: { title: 'Denim jacket', price_cents: 4500 },
    });
    t.equal(created.statusCode, 201);
  });
});

t.test('after a sandbox listing: milestone done, live key allowed', async (t) => {
  const shown = ok(t, await admin('app', 'show', '--app', appId));
  const milestone = (shown.milestones as Json).sandbox_listing as {
    done: boolean;
    completed_at: string | null;
  };
  t.equal(milestone.done, true);
  t.match(milestone.completed_at, ISO);

  const out = ok(
    t,
    await admin('key', 'create', '--app', appId, '--env', 'live', '--scopes', 'read'),
  );
  t.match(out.key, /^svc_live_[A-Za-z0-9_-]{32,}$/);
  t.equal(out.env, 'live');
  t.same(out.scopes, ['read']);
  liveKey = { id: out.id as string, key: out.key as string };
});

t.test('key revoke prints { id, revoked: true } and the key stops working', async (t) => {
  t.same(ok(t, await admin('key', 'revoke', '--id', sandboxKey.id)), {
    id: sandboxKey.id,
    revoked: true,
  });
  await withApp(async (app) => {
    const revoked = await app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: bearer(sandboxKey.key),
    });
    t.equal(revoked.statusCode, 401);
    t.equal(revoked.json().error.code, 'unauthorized');
    const live = await app.inject({
      method: 'GET',
      url: '/api/v1/me',
      headers: bearer(liveKey.key),
    });
    t.equal(live.statusCode, 200);
    t.equal(live.json().data.username, 'ana');
    t.equal(live.json().meta.environment, 'live');
  });
});

t.test("saved-search list and delete: an app's saved searches without a caller", async (t) => {
  const keyWith = async (env: 'sandbox' | 'live') =>
    ok(t, await admin('key', 'create', '--app', appId, '--env', env, '--scopes', 'read searches'))
      .key as string;
  const sandbox = await keyWith('sandbox');
  const live = await keyWith('live');
  const saved = await withApp(async (app) => {
    const save = async (key: string, name: string) => {
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/saved_searches',
        headers: bearer(key),
        payload: { name, q: 'jacket', brand: 'Barbour' },
      });
      t.equal(res.statusCode, 201, `${name} saved`);
      return res.json().data.id as string;
    };
    return [await save(sandbox, 'Sandbox jackets'), await save(live, 'Live jackets')];
  });

  const all = ok(t, await admin('saved-search', 'list', '--app', appId));
  t.same(Object.keys(all).sort(), ['next_cursor', 'saved_searches']);
  const items = all.saved_searches as Json[];
  t.same(
    items.map((s) => [s.name, s.environment, s.via_token]),
    [
      ['Live jackets', 'live', false],
      ['Sandbox jackets', 'sandbox', false],
    ],
    'both environments, newest first, each with its environment and maker',
  );
  t.match(items[0], { q: 'jacket', brand: 'Barbour', last_matched_at: null, created_at: ISO });
  t.equal(all.next_cursor, null);

  const live1 = ok(t, await admin('saved-search', 'list', '--app', appId, '--env', 'live'));
  t.same(
    (live1.saved_searches as Json[]).map((s) => s.id),
    [saved[1]],
  );
  const first = ok(t, await admin('saved-search', 'list', '--app', appId, '--limit', '1'));
  t.same(
    (first.saved_searches as Json[]).map((s) => s.id),
    [saved[1]],
  );
  const next = ok(
    t,
    await admin(
      'saved-search',
      'list',
      '--app',
      appId,
      '--limit',
      '1',
      '--cursor',
      first.next_cursor as string,
    ),
  );
  t.same(
    (next.saved_searches as Json[]).map((s) => s.id),
    [saved[0]],
  );
  t.equal(next.next_cursor, null);
  failed(
    t,
    await admin('saved-search', 'list', '--app', appId, '--env', 'staging'),
    'validation_error',
  );
  failed(
    t,
    await admin('saved-search', 'list', '--app', appId, '--limit', 'x'),
    'validation_error',
  );
  failed(t, await admin('saved-search', 'list', '--app', randomUUID()), 'not_found');

  t.same(ok(t, await admin('saved-search', 'delete', '--id', saved[1]!)), {
    id: saved[1],
    deleted: true,
  });
  failed(t, await admin('saved-search', 'delete', '--id', saved[1]!), 'not_found');
  failed(t, await admin('saved-search', 'delete', '--id', 'not-a-uuid'), 'not_found');
  const audit = ok(
    t,
    await admin('app', 'audit', '--app', appId, '--action', 'saved_search.deleted'),
  );
  t.match(
    audit.entries,
    [{ action: 'saved_search.deleted', actor: { type: 'admin_cli' }, target: saved[1] }],
    "the delete is in the app's audit log as the CLI's; the refused ones are not",
  );
  t.equal((audit.entries as Json[]).length, 1);
  t.same((audit.entries as Json[])[0]!.details, { environment: 'live' });
  const after = ok(t, await admin('saved-search', 'list', '--app', appId));
  t.same(
    (after.saved_searches as Json[]).map((s) => s.id),
    [saved[0]],
  );
  await withApp(async (app) => {
    const res = await app.inject({
      method: 'GET',
      url: `/api/v1/saved_searches/${saved[1]}`,
      headers: bearer(live),
    });
    t.equal(res.statusCode, 404, 'gone for the API too');
  });
});

t.test('errors: { error: { code, message } } on stderr, empty stdout, non-zero exit', async (t) => {
  t.test('unknown command (the real command)', async (t) => {
    failed(t, await spawnAdmin(['user', 'delete', '--username', 'ana']), undefined, /user delete/);
  });
  t.test('unknown app id (the real command)', async (t) => {
    failed(t, await spawnAdmin(['app', 'show', '--app', randomUUID()]), 'not_found');
  });
  t.test('no command at all', async (t) => {
    failed(t, await admin());
  });
  t.test('missing flag', async (t) => {
    failed(t, await admin('user', 'create', '--username', 'carol'), undefined, /--password/);
    failed(t, await admin('key', 'create', '--app', appId), undefined, /--env/);
  });
  t.test('usage mistakes are reported even when the database is unreachable', async (t) => {
    const unreachable = { NODE_ENV: 'test', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    failed(t, await runAdmin(['app', 'show'], unreachable), undefined, /--app/);
    failed(
      t,
      await runAdmin(
        ['key', 'create', '--app', appId, '--env', 'live', '--env', 'sandbox'],
        unreachable,
      ),
      undefined,
      /--env/,
    );
  });
  t.test('--help answers the usage (issue #59 item 8), without the database', async (t) => {
    const unreachable = { NODE_ENV: 'test', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    for (const word of ['--help', '-h', 'help']) {
      const help = ok(t, await runAdmin([word], unreachable));
      t.ok(
        (help.commands as string[]).some((usage) => usage.startsWith('app logs --app ID')),
        `${word}: every command's usage`,
      );
    }
    const all = ok(t, await runAdmin(['--help'], unreachable)).commands as string[];
    t.equal(all.length, Object.keys(COMMANDS).length, 'every command, once');
    const app = ok(t, await runAdmin(['app', '--help'], unreachable)).commands as string[];
    t.ok(app.length > 5 && app.every((usage) => usage.startsWith('app ')), "app's commands");
    for (const argv of [
      ['key', 'roll', '--help'],
      ['key', 'roll', '-h'],
      ['help', 'key', 'roll'],
      ['key', 'roll', '--id', 'K', '--help'],
    ])
      t.same(
        ok(t, await runAdmin(argv, unreachable)).commands,
        ['key roll --id KEY_ID --expires-in now|1h|24h|7d'],
        `${argv.join(' ')}: that command's usage`,
      );
    failed(t, await runAdmin(['nope', '--help'], unreachable), 'usage', /unknown command "nope"/);
    // A flag's value is a value: --name --help names the app "--help".
    failed(
      t,
      await runAdmin(['app', 'create', '--name', '--help'], unreachable),
      'usage',
      /--owner/,
    );
    // As a shell runs it: npm passes --help on to the command (not to npm itself).
    const spawned = await spawnAdmin(['webhook', 'rotate-secret', '--help']);
    t.equal(spawned.code, 0, 'npm run --silent admin -- webhook rotate-secret --help: exit 0');
    t.same(JSON.parse(spawned.stdout), { commands: [COMMANDS['webhook rotate-secret']!.usage] });
  });
  t.test('flag without a value', async (t) => {
    failed(t, await admin('app', 'show', '--app'), undefined, /--app/);
  });
  t.test('unknown flag', async (t) => {
    failed(
      t,
      await admin(
        'user',
        'create',
        '--username',
        'carol',
        '--password',
        'a long passphrase',
        '--admin',
        'yes',
      ),
      undefined,
      /--admin/,
    );
  });
  t.test('duplicate username', async (t) => {
    failed(
      t,
      await admin('user', 'create', '--username', 'ana', '--password', 'a long passphrase'),
      'conflict',
      /ana/,
    );
  });
  t.test('bad username', async (t) => {
    for (const username of ['Ana', 'ana-b']) {
      failed(
        t,
        await admin('user', 'create', '--username', username, '--password', 'a long passphrase'),
        'validation_error',
      );
    }
  });
  t.test('bad redirect URI', async (t) => {
    failed(
      t,
      await admin(
        'app',
        'create',
        '--owner',
        'ana',
        '--name',
        'X',
        '--redirect-uri',
        'http://example.com/cb',
      ),
      'validation_error',
    );
  });
  t.test('unknown owner', async (t) => {
    failed(t, await admin('app', 'create', '--owner', 'nobody', '--name', 'X'), 'not_found');
  });
  t.test('unknown app id', async (t) => {
    failed(t, await admin('app', 'show', '--app', 'not-a-uuid'), 'not_found');
    failed(t, await admin('app', 'secret', '--app', randomUUID()), 'not_found');
    failed(t, await admin('app', 'approve', '--app', randomUUID()), 'not_found');
    failed(t, await admin('key', 'create', '--app', randomUUID(), '--env', 'sandbox'), 'not_found');
  });
  t.test('unknown key id', async (t) => {
    failed(t, await admin('key', 'revoke', '--id', randomUUID()), 'not_found');
  });
  t.test('bad env and scopes', async (t) => {
    failed(t, await admin('key', 'create', '--app', appId, '--env', 'staging'), 'validation_error');
    failed(
      t,
      await admin('key', 'create', '--app', appId, '--env', 'sandbox', '--scopes', 'admin'),
      'validation_error',
    );
  });
});
