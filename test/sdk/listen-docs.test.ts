/**
 * The `listen` command as the docs print it (issue 59 item 2): docs/webhooks.md, sdk/README.md
 * and the portal's Webhooks page give the same line, and that line, pasted into bash at the
 * checkout's root with the key, the server and the receiver filled in, forwards a listing's
 * event to a local receiver, signed with the secret it prints, which the Standard Webhooks
 * libraries accept as printed (their default mode).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import t from 'tap';
import { apiKeyAuth, createMarketplaceClient } from '../../sdk/src/index.ts';
import { listenCommand } from '../../src/portal/snippets.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { localReceiver } from '../helpers/local-receiver.ts';
import { waitUntil } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCS_URL = 'http://127.0.0.1:3000';
const DOCS_HOOKS = 'http://localhost:4000/hooks';

/** The first sh block after `heading` in a Markdown file, its continuation lines joined. */
function shBlock(file: string, heading: string): string {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const section = text.split(heading)[1] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`${file} has no sh block after ${heading}`);
  return block.replace(/\\\n\s*/g, '').trim();
}

const docs = shBlock('docs/webhooks.md', '## Developing locally');
t.equal(docs, shBlock('sdk/README.md', '## Develop webhooks locally'), 'one command in both docs');
t.equal(docs, listenCommand(DOCS_URL, 'sandbox'), "and the portal's");
t.match(docs, /npm run --silent listen -- --forward-to/, 'runs from the checkout');

const { app, baseUrl } = await listeningApp(t, { WEBHOOK_WORKER: 'false' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox');
const api = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });

const { received, url } = await localReceiver(t);
const hooks = url('/hooks');

const config = mkdtempSync(path.join(tmpdir(), 'listen-docs-'));
t.teardown(() => rmSync(config, { recursive: true, force: true }));

t.test('the printed command forwards a verified event', async (t) => {
  const line = docs
    .replace('svc_sandbox_…', key)
    .replace(DOCS_URL, baseUrl)
    .replace(DOCS_HOOKS, hooks);
  // Its own process group, so that Ctrl-C (SIGINT to the group) reaches npm and the command.
  const child = spawn('bash', ['-c', line], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, NODE_OPTIONS: '', XDG_CONFIG_HOME: config },
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGINT');
    await exited;
  });

  const secret = (
    await waitUntil('listen to be ready', () => /^Signing secret: (whsec_\S+)/m.exec(out), {
      timeoutMs: 120_000,
    })
  )[1]!;
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'a standard secret is printed');
  await waitUntil('Ctrl-C to stop', () => out.includes('Ctrl-C to stop'), { timeoutMs: 60_000 });
  const { data: listing } = await api.listings.create({ title: 'From the docs', price_cents: 905 });
  const forward = await waitUntil('a forward', () => received[0], { timeoutMs: 60_000 });
  const event = new Webhook(secret).verify(forward.raw, forward.headers as never) as {
    type: string;
    data: { listing: { id: string } };
  };
  t.equal(event.type, 'listing.created', 'standardwebhooks verifies it as printed');
  t.equal(event.data.listing.id, listing.id);
  t.doesNotThrow(() => new SvixWebhook(secret).verify(forward.raw, forward.headers as never));

  // Ctrl-C: the whole group stops (npm's own exit status on SIGINT is npm's business).
  process.kill(-child.pid!, 'SIGINT');
  await exited;
  t.pass('Ctrl-C stops it');
});
