/**
 * A team of three runs one app (issue #61), in a real headless Chromium against the real server
 * process (startServerProcess) on a fresh database: the owner creates the app and invites a
 * developer and a viewer by username on the Members page; each accepts on their Apps page and
 * sees the app there with their role; the developer creates a sandbox key but is refused a live
 * one; the viewer sees the logs but is refused a key; neither has the Settings tab; the owner
 * removes the viewer, whose next page is not found. axe-core finds nothing serious on the new
 * pages. Screenshots: test-artifacts/portal-team-*.png.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import t from 'tap';
import { assertAccessible } from '../helpers/axe.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { openChromium, requireChromium } from '../helpers/chromium.ts';
import { startServerProcess } from '../helpers/private-servers.ts';

requireChromium(t);

const scratch = mkdtempSync(path.join(tmpdir(), 'portal-team-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const databaseUrl = await freshDatabaseUrl(t);
const server = await startServerProcess(t, {
  LOG_LEVEL: 'warn',
  SESSION_SECRET: 't'.repeat(40),
  RATE_LIMIT_MAX: '100000',
  ...(databaseUrl === 'memory://'
    ? { PGLITE_DIR: path.join(scratch, 'pglite') }
    : { DATABASE_URL: databaseUrl }),
});
const base = server.base;
const { browser, page: ownerPage, shot } = await openChromium(t, { shotPrefix: 'portal-team-' });
const newPage = async () =>
  (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();

const suffix = Date.now().toString(36);
const names = { owner: `own_${suffix}`, developer: `dev_${suffix}`, viewer: `view_${suffix}` };
const pages: Record<keyof typeof names, Page> = {
  owner: ownerPage,
  developer: await newPage(),
  viewer: await newPage(),
};
const tab = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'App sections' }).getByRole('link', { name });

async function signUp(page: Page, username: string): Promise<void> {
  await page.goto(`${base}/portal/signup`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(`correct horse ${username.length} battery staple`);
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Your apps' }).waitFor();
}

let appUrl = '';

t.test('the owner creates the app and invites a developer and a viewer', async (t) => {
  for (const role of ['owner', 'developer', 'viewer'] as const)
    await signUp(pages[role], names[role]);
  const page = pages.owner;
  await page.getByLabel('App name').fill('Team closet');
  await page.getByRole('button', { name: 'Create app' }).click();
  await page.getByRole('heading', { name: 'Team closet', level: 1 }).waitFor();
  appUrl = new URL(page.url()).pathname;
  await tab(page, 'Members').click();
  for (const role of ['developer', 'viewer'] as const) {
    await page.getByLabel('Username').fill(names[role]);
    await page.getByLabel('Role', { exact: true }).selectOption(role);
    await page.getByRole('button', { name: 'Send invitation' }).click();
    await page.getByText('The invitation was sent').waitFor();
  }
  const invited = page.getByRole('table', { name: 'Open invitations' });
  t.match(await invited.textContent(), new RegExp(`@${names.developer}\\s*developer`));
  t.match(await invited.textContent(), new RegExp(`@${names.viewer}\\s*viewer`));
  await assertAccessible(t, page, 'the Members page');
  await shot('01-members');
});

t.test('each accepts on their Apps page and sees the app with their role', async (t) => {
  for (const role of ['developer', 'viewer'] as const) {
    const page = pages[role];
    await page.goto(`${base}/portal/apps`);
    t.match(
      await page.getByRole('region', { name: 'Invitations' }).textContent(),
      /Team closet as/,
    );
    if (role === 'developer') {
      await assertAccessible(t, page, 'the Apps page with an invitation');
      await shot('02-invitation', { of: page });
    }
    await page.getByRole('button', { name: 'Accept the invitation to Team closet' }).click();
    await page.getByText('welcome to the team').waitFor();
    await page.goto(`${base}/portal/apps`);
    const row = page.getByRole('row').filter({ hasText: 'Team closet' });
    t.match(await row.textContent(), new RegExp(role), `listed with the role ${role}`);
  }
});

t.test('the developer makes sandbox keys, not live ones; no Settings', async (t) => {
  const page = pages.developer;
  await page.goto(`${base}${appUrl}`);
  t.equal(await tab(page, 'Settings').count(), 0, 'no Settings tab');
  await page.getByRole('button', { name: 'Create a sandbox key' }).click();
  await page.getByRole('heading', { name: /^Your new sandbox key/ }).waitFor();
  t.match(await page.locator('#new-key').inputValue(), /^svc_sandbox_/);
  await page.goto(`${base}${appUrl}/keys`);
  await page.getByLabel('Name').fill('Production sync');
  await page.getByLabel('Live').check();
  const created = page.waitForResponse((r) => r.request().method() === 'POST');
  await page.getByRole('button', { name: 'Create key' }).click();
  t.equal((await created).status(), 403, 'a live key is refused');
  t.match(await page.getByRole('alert').textContent(), /developer, does not allow this/);
});

t.test('the viewer sees the logs, and is refused a key', async (t) => {
  const page = pages.viewer;
  await page.goto(`${base}${appUrl}/logs`);
  await page.getByRole('heading', { name: 'Team closet', level: 1 }).waitFor();
  await page.goto(`${base}${appUrl}/keys`);
  await page.getByLabel('Name').fill('Peek');
  const created = page.waitForResponse((r) => r.request().method() === 'POST');
  await page.getByRole('button', { name: 'Create key' }).click();
  t.equal((await created).status(), 403);
  await page.getByText(/viewer, does not allow this/).waitFor();
  t.notOk(await page.locator('#new-key').count(), 'no key shown');
  await shot('03-viewer-refused', { of: page });
});

t.test('the owner removes the viewer, whose next page is not found', async (t) => {
  const page = pages.owner;
  await page.goto(`${base}${appUrl}/members`);
  await page.getByRole('button', { name: `Remove ${names.viewer}` }).click();
  await page.getByText('The member was removed').waitFor();
  const next = await pages.viewer.goto(`${base}${appUrl}/logs`);
  t.equal(next?.status(), 404);
  await pages.viewer.goto(`${base}/portal/apps`);
  t.equal(await pages.viewer.getByRole('row').filter({ hasText: 'Team closet' }).count(), 0);
});
