/**
 * The portal and the admin CLI are two doors into the same services (STYLE.md): on one
 * database, the page refuses a live key with exactly the CLI's words, and a production request
 * made in the page is what an operator lists with `admin app requests` and grants with
 * `admin app approve`, which the page then shows. The CLI runs for real (runAdmin, the code
 * path of `npm run admin`) on the same database, between two lives of the app.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { buildApp } from '../../src/app.ts';
import { runAdmin } from '../../src/cli/admin.ts';
import { loadConfig } from '../../src/config.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { alertOf, createApp, shownSecret, signUp } from './support.ts';

/**
 * One database for the file, kept between the app and the CLI: PostgreSQL, or a PGlite directory.
 */
async function databaseEnv(): Promise<Record<string, string>> {
  const base = { NODE_ENV: 'test', SESSION_SECRET: 's'.repeat(40), RATE_LIMIT_MAX: '1000000' };
  const url = await freshDatabaseUrl(t);
  if (url !== 'memory://') return { ...base, DATABASE_URL: url };
  const parent = mkdtempSync(join(tmpdir(), 'portal-cli-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  return { ...base, PGLITE_DIR: join(parent, 'db') };
}

const env = await databaseEnv();
const start = async (): Promise<FastifyInstance> => buildApp(loadConfig(env));
const admin = async (...argv: string[]) => {
  const result = await runAdmin(argv, env);
  return {
    code: result.code,
    out: result.stdout ? JSON.parse(result.stdout) : null,
    err: result.stderr ? JSON.parse(result.stderr) : null,
  };
};

let app = await start();
const user = await signUp(app);
const approvedApp = await createApp(user, 'Ready app');
const freshApp = await createApp(user, 'Fresh app');

const refused = await user.browser.act(
  `/portal/apps/${freshApp}/keys`,
  `/portal/apps/${freshApp}/keys`,
  { env: 'live', scopes: ['read', 'listings:write'] },
);
const pageWords = alertOf(refused.body);

const sandbox = await user.browser.act(
  `/portal/apps/${approvedApp}/keys`,
  `/portal/apps/${approvedApp}/keys`,
  { env: 'sandbox', scopes: ['listings:write'] },
);
const key = shownSecret(sandbox.body, 'new-key')!;
const listing = await app.inject({
  method: 'POST',
  url: '/api/v1/listings',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  payload: JSON.stringify({ title: 'Completes the milestone', price_cents: 1500 }),
});
const requested = await user.browser.act(
  `/portal/apps/${approvedApp}`,
  `/portal/apps/${approvedApp}/production-request`,
);
await app.close();

t.test(
  'a live key before the milestones: the page says what `admin key create` says',
  async (t) => {
    t.equal(refused.statusCode, 403);
    const cli = await admin('key', 'create', '--app', freshApp, '--env', 'live');
    t.equal(cli.code, 1);
    t.equal(cli.err.error.code, 'forbidden');
    t.equal(pageWords, cli.err.error.message, 'word for word');
  },
);

t.test("the page's production request is granted with `admin app approve`", async (t) => {
  t.equal(listing.statusCode, 201);
  t.equal(requested.statusCode, 303);
  const list = await admin('app', 'requests');
  t.equal(list.code, 0);
  t.match(list.out, {
    requests: [
      { id: approvedApp, name: 'Ready app', owner: user.username, requested_at: /^\d{4}-/ },
    ],
  });
  t.equal(list.out.requests.length, 1, 'only the app that asked');
  const approve = await admin('app', 'approve', '--app', approvedApp);
  t.same(approve.out, { id: approvedApp, production_approved: true });
  t.same((await admin('app', 'requests')).out, { requests: [] });

  app = await start();
  t.teardown(() => app.close());
  const browser = new Browser(app, user.browser.remoteAddress);
  for (const [name, value] of user.browser.cookies) browser.cookies.set(name, value);
  const overview = await browser.get(`/portal/apps/${approvedApp}`);
  t.equal(overview.statusCode, 200, 'the session lives in the database: still signed in');
  t.match(overview.body, /<span class="status-ok">Approved<\/span> <time/);

  // Approved: a live webhook endpoint is allowed now (EndpointsService), still through the page.
  const hooks = `/portal/apps/${approvedApp}/webhooks`;
  const live = await browser.act(hooks, hooks, { env: 'live', url: 'https://8.8.8.8/hooks' });
  t.equal(live.statusCode, 201, 'no longer refused for approval');
});
