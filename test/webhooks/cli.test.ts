/**
 * The webhook commands of the admin CLI (docs/cli.md): webhook create, ping, show, deliveries
 * and redeliver, with the CLI's conventions (one JSON object on stdout and exit 0, or
 * { error } on stderr). The CLI records; a server on the same database delivers.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { buildApp } from '../../src/app.ts';
import { runAdmin, type CliResult } from '../../src/cli/admin.ts';
import { loadConfig } from '../../src/config.ts';
import { MAX_ACTIVE_KEYS } from '../../src/apps/keys-service.ts';
import { MAX_ACTIVE_ENDPOINTS } from '../../src/webhooks/endpoints-service.ts';
import { REFUSED_DESTINATION } from '../../src/webhooks/ssrf.ts';
import { freshDatabaseEnv } from '../helpers/app.ts';
import { startReceiver, type Json } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

async function databaseEnv(): Promise<Record<string, string>> {
  const database = await freshDatabaseEnv(t);
  if (database.DATABASE_URL !== 'memory://') return database;
  const parent = mkdtempSync(join(tmpdir(), 'webhooks-cli-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  return { PGLITE_DIR: join(parent, 'db') };
}

const env: Record<string, string> = {
  NODE_ENV: 'test',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  ...(await databaseEnv()),
};
const admin = (...argv: string[]) => runAdmin(argv, env);
const receiver = await startReceiver(t);

function ok(t: Test, result: CliResult): Json {
  t.equal(result.code, 0, `exit 0 (stderr: ${result.stderr.trim()})`);
  t.equal(result.stderr, '');
  t.equal(result.stdout.trim().split('\n').length, 1, 'one line on stdout');
  return JSON.parse(result.stdout);
}

function failed(t: Test, result: CliResult, code: string, message?: RegExp | string): void {
  t.not(result.code, 0, 'non-zero exit');
  t.equal(result.stdout, '', 'nothing on stdout');
  const { error } = JSON.parse(result.stderr);
  t.equal(error.code, code, `error.code ${code}`);
  if (typeof message === 'string') t.equal(error.message, message);
  else if (message) t.match(error.message, message);
}

/**
 * Runs a server on the same database until `until` holds, then closes it (PGlite is
 * single-process).
 */
async function serveUntil(what: string, until: () => unknown): Promise<void> {
  const app = await buildApp(loadConfig(env));
  try {
    await waitUntil(what, until, { timeoutMs: 15_000 });
  } finally {
    await app.close();
  }
}

/** Setup outside any test: throws instead of asserting. */
function must(result: CliResult): Json {
  if (result.code !== 0) throw new Error(`setup failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}
must(await admin('user', 'create', '--username', 'hooker', '--password', 'correct horse battery'));
const app = must(await admin('app', 'create', '--owner', 'hooker', '--name', 'Hooks'));
let endpointId = '';

t.test('webhook create', async (t) => {
  const created = ok(
    t,
    await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--env',
      'sandbox',
      '--url',
      receiver.url('/cli'),
    ),
  );
  t.strictSame(Object.keys(created).sort(), ['env', 'id', 'secret', 'url']);
  t.match(created, {
    id: /^[0-9a-f-]{36}$/,
    url: receiver.url('/cli'),
    env: 'sandbox',
    secret: /^svc_whsec_[A-Za-z0-9+/]{43}=$/,
  });
  receiver.secrets.set('/cli', created.secret);
  endpointId = created.id;

  failed(
    t,
    await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--env',
      'live',
      '--url',
      receiver.url('/live'),
    ),
    'forbidden',
    /production-approved/,
  );
  ok(t, await admin('app', 'approve', '--app', app.id));
  t.match(
    ok(
      t,
      await admin(
        'webhook',
        'create',
        '--app',
        app.id,
        '--env',
        'live',
        '--url',
        receiver.url('/live'),
      ),
    ),
    { env: 'live' },
  );
  failed(
    t,
    await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--env',
      'sandbox',
      '--url',
      'http://example.com/hook',
    ),
    'validation_error',
    /https/,
  );
  // Usage mistakes are reported before the database is opened.
  failed(
    t,
    await admin('webhook', 'create', '--app', app.id, '--env', 'sandbox'),
    'usage',
    /--url is required/,
  );
  failed(t, await admin('webhook', 'redeliver', '--id', 'x'), 'usage', /unknown flag --id/);
});

t.test('webhook show, ping, deliveries, redeliver', async (t) => {
  const id = endpointId;
  t.strictSame(ok(t, await admin('webhook', 'show', '--id', id)), {
    id,
    url: receiver.url('/cli'),
    env: 'sandbox',
    active: true,
    last_error: null,
    last_failure_at: null,
  });
  failed(t, await admin('webhook', 'show', '--id', 'nope'), 'not_found');

  const { delivery_id } = ok(t, await admin('webhook', 'ping', '--id', id));
  t.match(delivery_id, /^[0-9a-f]{32}$/);
  const pending = ok(t, await admin('webhook', 'deliveries', '--id', id));
  t.equal(pending.endpoint_id, id);
  t.match(pending.deliveries, [
    {
      id: delivery_id,
      type: 'ping',
      status: 'pending',
      attempts: 0,
      last_response_code: null,
      last_error: null,
    },
  ]);

  // The CLI only records; a server on the same database delivers, verified with the helper.
  receiver.reply = () => ({ status: 500 });
  await serveUntil('the ping', () => receiver.to('/cli').length === 1);
  const first = receiver.to('/cli')[0]!;
  t.equal(first.verifyError, null);
  t.match(first.event, { id: delivery_id, type: 'ping', data: { message: /Test delivery/ } });
  const failedOnce = ok(t, await admin('webhook', 'deliveries', '--id', id));
  t.match(failedOnce.deliveries[0], {
    id: delivery_id,
    status: 'pending',
    attempts: 1,
    last_response_code: 500,
    last_error: 'HTTP 500',
    next_attempt_at: /Z$/,
  });
  t.match(ok(t, await admin('webhook', 'show', '--id', id)), {
    last_error: 'HTTP 500',
    last_failure_at: /Z$/,
  });
  failed(t, await admin('webhook', 'redeliver', '--delivery', delivery_id), 'conflict', /pending/);
});

t.test('the real command, as an operator runs it', async (t) => {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const result = await new Promise<CliResult>((done, fail) => {
    const child = spawn(
      'npm',
      [
        'run',
        '--silent',
        'admin',
        '--',
        'webhook',
        'deliveries',
        '--id',
        endpointId,
        '--limit',
        '5',
      ],
      {
        cwd: ROOT,
        env: childEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code: code ?? -1, stdout, stderr }));
  });
  const listed = ok(t, { ...result, stderr: result.stderr.replace(/^npm warn.*\n/gm, '') });
  t.equal(listed.deliveries.length, 1);
  t.equal(listed.deliveries[0].attempts, 1);
});

t.test('a failed delivery is redelivered with the same id', async (t) => {
  const id = endpointId;
  // Mark it failed as the schedule's end would (the default schedule is hours long).
  const delivery_id: string = ok(t, await admin('webhook', 'deliveries', '--id', id)).deliveries[0]
    .id;
  const { openDatabase } = await import('../../src/db/client.ts');
  const { sql } = await import('drizzle-orm');
  const handle = await openDatabase({
    databaseUrl: env.DATABASE_URL,
    directUrl: env.DATABASE_DIRECT_URL,
    pgliteDir: env.PGLITE_DIR ?? '',
    poolSize: 1,
  });
  await handle.db.execute(
    sql`update webhook_deliveries set status = 'failed' where id = ${delivery_id}`,
  );
  await handle.close();

  t.strictSame(ok(t, await admin('webhook', 'redeliver', '--delivery', delivery_id)), {
    delivery_id,
    status: 'pending',
  });
  receiver.reply = () => ({ status: 200 });
  await serveUntil('the redelivery', () => receiver.to('/cli').length === 2);
  t.equal(receiver.to('/cli')[1]!.event!.id, delivery_id, 'the same delivery id');
  t.match(ok(t, await admin('webhook', 'deliveries', '--id', id)).deliveries[0], {
    id: delivery_id,
    status: 'succeeded',
    attempts: 1,
    last_response_code: 200,
    last_error: null,
    next_attempt_at: null,
  });
});

t.test(
  'webhook create refuses IPv6 forms that embed an internal IPv4 address (issue #13)',
  async (t) => {
    const refusing = { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' };
    for (const url of ['https://[::127.0.0.1]/h', 'https://[::ffff:0:7f00:1]/h']) {
      const result = await runAdmin(
        ['webhook', 'create', '--app', app.id, '--env', 'sandbox', '--url', url],
        refusing,
      );
      failed(t, result, 'validation_error', `The URL ${REFUSED_DESTINATION}.`);
    }
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS=true (this file's setting) still lets them through.
    t.match(
      ok(
        t,
        await admin(
          'webhook',
          'create',
          '--app',
          app.id,
          '--env',
          'sandbox',
          '--url',
          'https://[::ffff:0:7f00:1]/h',
        ),
      ),
      {
        url: 'https://[::ffff:0:7f00:1]/h',
      },
    );
  },
);

t.test('webhook create refuses a 17th active endpoint in one environment', async (t) => {
  const crowded = must(await admin('app', 'create', '--owner', 'hooker', '--name', 'Crowded'));
  const create = (path: string) =>
    admin(
      'webhook',
      'create',
      '--app',
      crowded.id,
      '--env',
      'sandbox',
      '--url',
      `https://93.184.215.14/${path}`,
    );
  for (let i = 0; i < MAX_ACTIVE_ENDPOINTS; i += 1) must(await create(String(i)));
  const refused = await create('one-more');
  failed(t, refused, 'conflict', /already has 16 active sandbox webhook endpoints/);
});

t.test('key create refuses a 51st active key in one environment', async (t) => {
  const crowded = must(await admin('app', 'create', '--owner', 'hooker', '--name', 'Many keys'));
  // The first 50 through the same service, on a server over this database (faster than 50 runs).
  const server = await buildApp(loadConfig(env));
  try {
    for (let i = 0; i < MAX_ACTIVE_KEYS; i += 1)
      await server.services.keys.create({ appId: crowded.id, env: 'sandbox' });
  } finally {
    await server.close();
  }
  const refused = await admin('key', 'create', '--app', crowded.id, '--env', 'sandbox');
  failed(t, refused, 'conflict', /already has 50 active sandbox API keys/);
});

t.test('webhook create --events, webhook update, webhook delete', async (t) => {
  const created = ok(
    t,
    await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--env',
      'sandbox',
      '--url',
      'https://93.184.215.14/events',
      '--events',
      'listing.created,listing.archived',
    ),
  );
  t.strictSame(Object.keys(created).sort(), ['env', 'id', 'secret', 'url'], "CONTRACT.md's output");
  const updated = ok(
    t,
    await admin('webhook', 'update', '--id', created.id, '--events', 'listing.archived'),
  );
  t.strictSame(updated, {
    id: created.id,
    url: 'https://93.184.215.14/events',
    env: 'sandbox',
    enabled_events: ['listing.archived'],
    active: true,
  });
  t.match(
    ok(
      t,
      await admin(
        'webhook',
        'update',
        '--id',
        created.id,
        '--url',
        'https://93.184.215.14/v2',
        '--events',
        '*',
      ),
    ),
    { url: 'https://93.184.215.14/v2', enabled_events: ['*'] },
  );
  failed(
    t,
    await admin('webhook', 'update', '--id', created.id, '--events', 'listing.sold'),
    'validation_error',
    /There is no event type listing\.sold/,
  );
  failed(
    t,
    await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--env',
      'sandbox',
      '--url',
      'https://93.184.215.14/x',
      '--events',
      '*,listing.created',
    ),
    'validation_error',
    /stands for every event type/,
  );
  failed(
    t,
    await admin('webhook', 'update', '--id', created.id, '--url', 'http://93.184.215.14/plain'),
    'validation_error',
  );
  failed(t, await admin('webhook', 'update', '--id', created.id), 'usage', /--url or --events/);

  t.strictSame(ok(t, await admin('webhook', 'delete', '--id', created.id)), {
    id: created.id,
    deleted: true,
  });
  failed(t, await admin('webhook', 'show', '--id', created.id), 'not_found');
  failed(t, await admin('webhook', 'delete', '--id', created.id), 'not_found');
  failed(t, await admin('webhook', 'enable', '--id', created.id), 'not_found');
});
