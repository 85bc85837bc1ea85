/**
 * Portal test support: sign-up and app helpers that go through the pages (with the browser of
 * test/helpers/browser.ts), readers of the pages' messages, and an app whose log lines are kept
 * (to look for secrets in them).
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp, serverOptions } from '../../src/app.ts';
import { COMMANDS } from '../../src/cli/admin.ts';
import { testConfig, type TestLike } from '../helpers/app.ts';
import { Browser, unescapeHtml } from '../helpers/browser.ts';

/** The text of the page's role=alert paragraph, unescaped. */
export function alertOf(html: string): string | undefined {
  const match = /<p class="alert" role="alert">([^<]*)<\/p>/.exec(html);
  return match?.[1] === undefined ? undefined : unescapeHtml(match[1]);
}

export function noticeOf(html: string): string | undefined {
  const match = /<p class="notice" role="status">([^<]*)<\/p>/.exec(html);
  return match?.[1] === undefined ? undefined : unescapeHtml(match[1]);
}

/** The value of the read-only input that shows a secret once. */
export function shownSecret(html: string, id: string): string | undefined {
  const match = new RegExp(`id="${id}" class="mono" value="([^"]+)"`).exec(html);
  return match?.[1];
}

export interface PortalUser {
  browser: Browser;
  username: string;
  password: string;
}

const suffix = () => randomBytes(4).toString('hex');

/** Signs up through the page; the browser is signed in afterwards. */
export async function signUp(
  app: FastifyInstance,
  username = `dev_${suffix()}`,
): Promise<PortalUser> {
  const browser = new Browser(app);
  const password = `pw ${suffix()} long enough`;
  await browser.get('/portal/signup');
  const res = await browser.submit(
    { username, password, return_to: '/portal/apps' },
    '/portal/signup',
  );
  if (res.statusCode !== 303)
    throw new Error(`sign-up failed: ${res.statusCode} ${alertOf(res.body)}`);
  return { browser, username, password };
}

/** Creates an API key through the app's Keys page; returns the key, shown once there. */
export async function createKeyInPortal(
  user: PortalUser,
  appId: string,
  form: { env?: 'sandbox' | 'live'; scopes?: string[]; name?: string } = {},
): Promise<string> {
  const keysUrl = `/portal/apps/${appId}/keys`;
  const res = await user.browser.act(keysUrl, keysUrl, {
    env: form.env ?? 'sandbox',
    scopes: form.scopes ?? ['read', 'listings:write'],
    ...(form.name === undefined ? {} : { name: form.name }),
  });
  const key = shownSecret(res.body, 'new-key');
  if (!key) throw new Error(`key not created: ${res.statusCode} ${alertOf(res.body)}`);
  return key;
}

/** Creates an app through the page; returns its id. */
export async function createApp(user: PortalUser, name = `App ${suffix()}`): Promise<string> {
  const res = await user.browser.act('/portal/apps', '/portal/apps', { name });
  const match = /^\/portal\/apps\/([0-9a-f-]{36})\?done=created$/.exec(
    String(res.headers.location),
  );
  if (res.statusCode !== 303 || !match?.[1])
    throw new Error(`app creation failed: ${res.statusCode} ${alertOf(res.body)}`);
  return match[1];
}

/** An app with every log line kept, at trace level, through the production logger options. */
export async function appWithLog(
  t: TestLike,
  env: Record<string, string> = {},
): Promise<{ app: FastifyInstance; log: () => string }> {
  const config = await testConfig(t, { RATE_LIMIT_MAX: '1000000', ...env });
  let lines = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines += chunk.toString();
      done();
    },
  });
  const options = serverOptions({ ...config, logLevel: 'trace' });
  const logger = { ...(options.logger as object), level: 'trace', stream };
  const app = await buildApp(config, { logger });
  t.teardown(() => app.close());
  return { app, log: () => lines };
}

/** Runs an admin CLI command (src/cli/admin.ts COMMANDS) with one value per flag. */
export const adminCli = (app: FastifyInstance, command: string, flags: Record<string, string>) =>
  COMMANDS[command]!.run(app.services, new Map(Object.entries(flags).map(([k, v]) => [k, [v]])));

/**
 * The text (tags dropped, unescaped) of the cell under the column headed `header`, in the first
 * table row that contains `rowText`.
 */
export function cellUnder(html: string, rowText: string, header: string): string | undefined {
  const text = (cell: string) => unescapeHtml(cell.replace(/<[^>]*>/g, '')).trim();
  const headers = [...html.matchAll(/<th scope="col">(.*?)<\/th>/g)].map((m) => text(m[1]!));
  const row = html.split('<tr>').find((r) => r.includes(rowText) && r.includes('<td'));
  const cells = [...(row ?? '').matchAll(/<td>([\s\S]*?)<\/td>/g)].map((m) => text(m[1]!));
  return cells[headers.indexOf(header)];
}
