/**
 * The first-run path of a newcomer, in a real headless Chromium against the real server
 * process (`node --import tsx src/server.ts`, as `npm start` runs it): the URL the start banner
 * prints, sign up, create an app, create a sandbox key, copy the curl line with the page's copy
 * button, run it for real, and find the listing in the sandbox inventory, all within a minute.
 * Screenshots go to test-artifacts/portal-*.png. The server's log is checked for the secrets
 * typed and shown along the way.
 *
 * On PGlite the server runs on a fresh embedded database directory (the real first run, with
 * its demo account); with DATABASE_URL=postgres://... on a fresh PostgreSQL database.
 * Chromium is Debian's (/usr/bin/chromium, installed by .ci/run); without it the test is
 * skipped locally and fails under CI.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { freePort } from '../helpers/processes.ts';
import { openChromium, requireChromium } from '../helpers/chromium.ts';
import { deadline, waitUntil } from '../helpers/wait.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

requireChromium(t);

/* ----------------------------------------------------- the server, as npm start runs it */

const scratch = mkdtempSync(path.join(tmpdir(), 'portal-browser-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

const port = await freePort();
const databaseUrl = await freshDatabaseUrl(t);
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PORT: String(port),
  HOST: '127.0.0.1',
  NODE_ENV: 'development',
  LOG_LEVEL: 'info',
};
for (const name of ['DATABASE_URL', 'BASE_URL', 'SESSION_SECRET', 'PGLITE_DIR']) delete env[name];
if (databaseUrl === 'memory://') env.PGLITE_DIR = path.join(scratch, 'pglite');
else env.DATABASE_URL = databaseUrl;

const server: ChildProcessWithoutNullStreams = spawn(
  process.execPath,
  ['--import', 'tsx', 'src/server.ts'],
  { cwd: ROOT, env },
);
let output = '';
server.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
server.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
const exited = new Promise<void>((resolve) => server.on('exit', () => resolve()));
t.teardown(async () => {
  if (server.exitCode === null && server.signalCode === null) {
    server.kill('SIGTERM');
    await deadline('the server to exit', exited, 10_000, () => server.kill('SIGKILL')).catch(
      () => exited,
    );
  }
});

const banner = (pattern: RegExp): Promise<RegExpMatchArray> =>
  waitUntil(
    `${pattern} in the output`,
    () => {
      if (server.exitCode !== null) throw new Error(`the server exited: ${output}`);
      return pattern.exec(output);
    },
    { timeoutMs: 60_000, everyMs: 100 },
  );

const [, portalUrl] = await banner(/Start here: (http:\/\/\S+\/portal)\b/);
const base = portalUrl!.replace(/\/portal$/, '');

/* ------------------------------------------------------------------ the browser */

const { context, page, shot } = await openChromium(t, { profile: true, shotPrefix: 'portal-' });
await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });

const consoleErrors: string[] = [];
const visited: string[] = [];
page.on('console', (message) => {
  if (message.type() === 'error') consoleErrors.push(message.text());
});
page.on('pageerror', (error) => consoleErrors.push(error.message));
page.on('response', (response) => {
  if (response.status() >= 400) consoleErrors.push(`${response.status()} ${response.url()}`);
});
page.on('framenavigated', (frame) => {
  if (frame === page.mainFrame()) visited.push(frame.url());
});
const tab = (name: string) =>
  page.getByRole('navigation', { name: 'App sections' }).getByRole('link', { name });

function sh(line: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('sh', ['-c', line], { timeout: 15_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

const username = `newcomer_${Date.now().toString(36)}`;
const password = 'my first portal password';
let sandboxKey = '';

t.test(
  'a newcomer goes from the printed URL to a listing in the sandbox inventory within a minute',
  async (t) => {
    const started = Date.now();

    await page.goto(portalUrl!);
    t.equal(await page.title(), 'Developer portal · Marketplace');
    await shot('01-landing');
    await page.keyboard.press('Tab');
    t.equal(
      await page.evaluate(() => document.activeElement?.textContent),
      'Skip to content',
      'the first stop of the keyboard is the skip link',
    );

    await page.getByRole('link', { name: 'Create an account' }).first().click();
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Your apps' }).waitFor();
    t.equal(new URL(page.url()).pathname, '/portal/apps', 'signed up and signed in');
    await shot('02-apps');

    await page.getByLabel('App name').fill('Closet sync');
    await page.getByRole('button', { name: 'Create app' }).click();
    await page.getByRole('heading', { name: 'Closet sync', level: 1 }).waitFor();
    t.match(await page.getByRole('status').first().textContent(), /Your app is ready/);
    await shot('03-overview');

    await page.getByRole('button', { name: 'Create a sandbox key' }).click();
    await page.getByRole('heading', { name: /^Your new sandbox key/ }).waitFor();
    t.match(await page.locator('.secret-once').textContent(), /you will not see this again/);
    sandboxKey = await page.locator('#new-key').inputValue();
    t.match(sandboxKey, /^svc_sandbox_[A-Za-z0-9_-]{43}$/, 'the key is on the page');
    t.notOk(page.url().includes(sandboxKey), 'but not in its URL');
    await shot('04-key-created');

    // The copy button (portal.js) puts the curl line on the clipboard; run exactly that.
    const copy = page.getByRole('button', { name: 'Copy curl line' });
    t.ok(await copy.isVisible(), 'the copy button is shown once the script runs');
    await copy.click();
    await page.getByText('Copied').first().waitFor();
    const line = await page.evaluate(() => navigator.clipboard.readText());
    t.equal(
      line,
      await page.locator('#curl-create').textContent(),
      'the clipboard holds the line shown',
    );
    t.match(
      line,
      new RegExp(
        `^curl -s -X POST '${base}/api/v1/listings' -H 'Authorization: Bearer ${sandboxKey}'`,
      ),
    );
    const created = JSON.parse(await sh(line)) as {
      data: { id: string; title: string; status: string };
      meta: { environment: string };
    };
    t.match(
      created,
      {
        data: { title: 'My first sandbox listing', status: 'draft' },
        meta: { environment: 'sandbox' },
      },
      'the curl line created a sandbox listing',
    );

    await tab('Inventory').click();
    const row = page.getByRole('row').filter({ hasText: created.data.id });
    await row.waitFor();
    t.match(await row.textContent(), /My first sandbox listing[\s\S]*draft[\s\S]*25\.00 USD/);
    await shot('05-inventory');
    const seconds = (Date.now() - started) / 1000;
    t.ok(
      seconds < 60,
      `from the printed URL to the listing in the inventory: ${seconds.toFixed(1)} s`,
    );
  },
);

t.test('the checklist, the keys list and a narrow screen after the first listing', async (t) => {
  await tab('Overview').click();
  const checklist = page.locator('ol.checklist');
  await checklist.waitFor();
  t.match(
    await checklist.textContent(),
    /Create a listing with a sandbox key of this app[\s\S]*Done/,
    'sandbox_listing is done',
  );
  t.match(await checklist.textContent(), /Live API keys[\s\S]*Unlocked/);
  await shot('06-checklist');

  await tab('API keys').click();
  const keyRow = page.getByRole('row').filter({ hasText: sandboxKey.slice(0, 18) });
  await keyRow.waitFor();
  t.match(
    await keyRow.textContent(),
    /sandbox[\s\S]*read listings:write[\s\S]*UTC[\s\S]*UTC[\s\S]*Active/,
    'prefix, scopes, created and last used',
  );
  t.notOk((await page.content()).includes(sandboxKey), 'the key itself is not shown again');
  await shot('07-keys');

  // At 1,280 px: the app's nine tabs on one row, and the scopes' descriptions with their code
  // (`listing.matched`) as code, wrapping with the words instead of widening the page.
  t.equal(page.viewportSize()?.width, 1280);
  const tabRows = await page.evaluate(
    () =>
      new Set(
        [...document.querySelectorAll('nav[aria-label="App sections"] li')].map((li) =>
          Math.round(li.getBoundingClientRect().top),
        ),
      ).size,
  );
  t.equal(tabRows, 1, 'the tab bar is one row at 1,280 px (Settings included)');
  const searches = page.locator('label.choice').filter({ hasText: /searches: Save searches/ });
  t.equal(await searches.locator('code').first().textContent(), 'listing.matched');
  t.notMatch(await searches.textContent(), /`/, 'no Markdown backticks shown');
  const wide = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  t.ok(wide <= 0, `API keys at 1,280 px: no sideways scrolling (overflow ${wide}px)`);

  // Choose live now that the milestone is done: the page creates it.
  await page.getByRole('radio', { name: /Live/ }).check();
  await page.getByLabel(/^Name/).fill('Closet sync, live');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('heading', { name: 'Your new live key: Closet sync, live' }).waitFor();
  t.match(await page.locator('#new-key').inputValue(), /^svc_live_/);

  await page.setViewportSize({ width: 390, height: 844 });
  await tab('Overview').click();
  await checklist.waitFor();
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  t.ok(overflow <= 0, `no sideways scrolling on a phone-sized screen (overflow ${overflow}px)`);
  await shot('08-mobile');
  for (const name of ['API keys', 'Inventory']) {
    await tab(name).click();
    await page.waitForLoadState();
    const sideways = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    if (sideways > 0) {
      await shot(`debug-${name.replace(/\W/g, '')}`);
      const wide = await page.evaluate(() =>
        [...document.querySelectorAll('body *')]
          .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
          .slice(0, 5)
          .map((e) => `${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`),
      );
      t.comment(wide.join(' | '));
    }
    t.ok(
      sideways <= 0,
      `${name}: the page itself does not scroll sideways (tables scroll in their box)`,
    );
  }
  await shot('09-mobile-inventory', { fullPage: false });
  await page.setViewportSize({ width: 1280, height: 900 });
});

const shownSecrets: string[] = [];

/** A refusal answers 400 on purpose (the page says why); the browser logs that status. */
async function refusedOnPurpose(t: Test, submit: () => Promise<unknown>): Promise<void> {
  const before = consoleErrors.length;
  await submit();
  await page.getByRole('alert').waitFor();
  const added = consoleErrors.splice(before);
  t.ok(
    added.length > 0 && added.every((e) => /\b400\b/.test(e)),
    'the only errors are the 400 of the refused form',
  );
}

t.test('the OAuth and webhooks pages, refusals and secrets shown once', async (t) => {
  await tab('OAuth').click();
  await page.getByLabel('Add a redirect URI').fill('http://example.com/callback');
  await refusedOnPurpose(t, () => page.getByRole('button', { name: 'Add', exact: true }).click());
  t.match(
    await page.getByRole('alert').textContent(),
    /Use an https redirect URI/,
    'refused with the rule',
  );
  await page
    .getByLabel('Add a redirect URI')
    .fill('https://closet-sync.example.com/oauth/callback');
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await page.getByText('The redirect URI was added.').waitFor();
  await page.getByRole('button', { name: 'Create a client secret' }).click();
  const secret = await page.locator('#client-secret').inputValue();
  shownSecrets.push(secret);
  t.match(secret, /^svc_cs_/);
  await shot('10-oauth');

  await tab('Webhooks').click();
  await page.getByLabel('URL', { exact: true }).fill('http://example.com/hooks');
  await refusedOnPurpose(t, () => page.getByRole('button', { name: 'Add endpoint' }).click());
  t.match(await page.getByRole('alert').textContent(), /https/, 'an http URL is refused');
  await shot('11-webhooks-refused', { fullPage: false });
  // A public address literal: accepted without DNS; nothing is sent to it in this test.
  await page.getByLabel('URL', { exact: true }).fill('https://93.184.215.14/hooks');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const whsec = await page.locator('#webhook-secret').inputValue();
  shownSecrets.push(whsec);
  t.match(whsec, /^svc_whsec_[A-Za-z0-9+/]{43}=$/);
  const box = await page.locator('section.secret-once').textContent();
  t.match(box, /If you lose it, rotate the secret on this endpoint's page/, 'lost: rotate');
  t.notMatch(box, /create a new endpoint/);
  await shot('12-webhooks');
});

t.test('no script errors, no secret in any URL or in the server log', async (t) => {
  t.same(consoleErrors, [], 'no console errors (a CSP violation would be one)');
  t.ok(visited.length > 5);
  for (const url of visited) {
    t.notOk(url.includes('svc_'), `no credential in ${url}`);
    t.notOk(
      url.includes(encodeURIComponent(password)) || url.includes(password),
      `no password in ${url}`,
    );
  }
  t.notOk(output.includes(sandboxKey), 'the sandbox key is not in the server log');
  t.notOk(output.includes(password), 'the password is not in the server log');
  t.equal(shownSecrets.length, 2);
  for (const secret of shownSecrets)
    t.notOk(
      output.includes(secret) || visited.some((u) => u.includes(secret)),
      `${secret.slice(0, 12)}… not logged, not in a URL`,
    );
  t.notMatch(output, /svc_live_[A-Za-z0-9_-]{20}/, 'no live key in the server log');
  t.match(
    output,
    /"url":"\/portal\/signup"|\/portal\/signup/,
    'the log has the requests (so the checks above looked at something)',
  );
});
