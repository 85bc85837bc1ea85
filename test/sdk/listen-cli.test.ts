/**
 * The `listen` command (sdk/src/cli.ts, run from source) against a live server: its signing
 * secret is never an argument (issue #43 item 6): `--secret` is refused without being echoed, and
 * the secret comes from MARKETPLACE_LISTEN_SECRET or the file --secret-file names, is not printed,
 * and signs the forwards; a plain-http API URL to another host is refused before anything is sent
 * unless --allow-insecure-http. (The packed command: test/consumers/sdk-package.ci.ts; the
 * library function: ./listen.test.ts.)
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import {
  apiKeyAuth,
  createMarketplaceClient,
  newListenSecret,
  verifyWebhook,
} from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { waitUntil } from '../helpers/wait.ts';
import { runCli } from './support.ts';

// Ends the file once the tests are done (the app's idle keep-alive connections would hold it).
t.plan(3);
const { app, baseUrl } = await listeningApp(t, { WEBHOOK_WORKER: 'false' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const api = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });
const work = mkdtempSync(path.join(tmpdir(), 'listen-cli-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const config = path.join(work, 'config');
const machineSecretFile = path.join(config, 'marketplace-listings-sdk', 'listen-secret');

/** The receiver: what each forward's signature verified with, by the secret under test. */
let expected = '';
const verified: boolean[] = [];
const receiver = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    verifyWebhook(expected, Buffer.concat(chunks).toString('utf8'), request.headers).then(
      () => verified.push(true),
      () => verified.push(false),
    );
    response.writeHead(204).end();
  });
});
await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
t.teardown(() => new Promise<void>((done) => receiver.close(() => done())));
const hooks = `http://localhost:${(receiver.address() as AddressInfo).port}/hooks`;

/** Starts `listen` from source; stops it (SIGINT) in teardown. */
function command(t: Test, args: string[], env: Record<string, string> = {}) {
  return runCli(t, ['listen', ...args], { key, baseUrl, configHome: config, env });
}

t.test('--secret is refused, and not echoed', async (t) => {
  const secret = newListenSecret();
  const run = command(t, ['--forward-to', hooks, '--secret', secret]);
  t.equal(await run.exitCode(), 2, 'a usage error');
  t.match(run.err(), /--secret is not accepted.*MARKETPLACE_LISTEN_SECRET.*--secret-file/s);
  t.notMatch(run.out() + run.err(), secret, 'the secret is not printed');

  const missing = command(t, ['--forward-to', hooks, '--secret-file', path.join(work, 'none')]);
  t.equal(await missing.exitCode(), 2, 'a --secret-file that cannot be read: a usage error');
  t.match(missing.err(), /Cannot read --secret-file/);
});

t.test(
  'the secret from MARKETPLACE_LISTEN_SECRET or --secret-file signs the forwards',
  async (t) => {
    const file = path.join(work, 'secret');
    const fromFile = newListenSecret();
    writeFileSync(file, `${fromFile}\n`, { mode: 0o600 });
    const fromEnv = newListenSecret();
    for (const [from, secret, args, env] of [
      ['MARKETPLACE_LISTEN_SECRET', fromEnv, [], { MARKETPLACE_LISTEN_SECRET: fromEnv }],
      [`--secret-file ${file}`, fromFile, ['--secret-file', file], {}],
    ] as const) {
      expected = secret;
      verified.length = 0;
      const run = command(t, ['--forward-to', hooks, ...args], env);
      await waitUntil(`${from}: ready`, () => /Ctrl-C to stop/.test(run.out()), {
        timeoutMs: 30_000,
      });
      t.match(run.out(), `Signing secret: the one in ${from} (not shown`, `${from}: named`);
      t.notMatch(run.out() + run.err(), secret, `${from}: not printed`);
      await api.listings.create({ title: `Signed with ${from}`, price_cents: 904 });
      await waitUntil(`${from}: a forward`, () => verified.length >= 1, { timeoutMs: 15_000 });
      t.strictSame(verified, [true], `${from}: the forward verifies with it`);
      run.child.kill('SIGINT');
      t.equal(await run.exitCode(), 0, `${from}: Ctrl-C exits 0 (${run.err()})`);
    }
    t.notOk(existsSync(machineSecretFile), 'no machine secret was made');
  },
);

t.test('a plain-http API URL to another host', async (t) => {
  const env = { MARKETPLACE_URL: 'http://192.0.2.1:3000', MARKETPLACE_LISTEN_SECRET: 'whsec_x' };
  const run = command(t, ['--forward-to', hooks], env);
  t.equal(await run.exitCode(), 2, 'refused');
  t.match(run.err(), /plain http .*--allow-insecure-http/);
  t.notMatch(run.out(), /Ready/, 'before polling');

  // Allowed, it polls: this machine's own non-loopback address, where nothing listens on the
  // port (the app is on 127.0.0.1 only), answers at once with a refusal it reports and retries.
  const address = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  if (address === undefined) t.comment('no non-loopback address here: the allowed case skipped');
  else {
    const allowed = command(t, ['--forward-to', hooks, '--allow-insecure-http'], {
      ...env,
      MARKETPLACE_URL: `http://${address}:${new URL(baseUrl).port}`,
    });
    await waitUntil('a poll tried', () => /polling failed/.test(allowed.err()), {
      timeoutMs: 30_000,
    });
    t.notMatch(allowed.err(), /plain http/, '--allow-insecure-http: not refused, it polls');
  }

  const help = command(t, ['--help']);
  t.equal(await help.exitCode(), 0);
  t.match(help.out(), /--allow-insecure-http/, 'the flag is in the usage text');
  t.match(help.out(), /MARKETPLACE_LISTEN_SECRET/);
  t.notMatch(help.out(), /--secret SECRET/, 'and --secret is not');
});
