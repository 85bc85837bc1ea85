/**
 * The portal's "Send test event" on an endpoint's page (issue #59 item 7), in a real headless
 * Chromium at 1280 px against the app on a real socket: a type the endpoint enabled is chosen in
 * the select and the button delivers that test event to this endpoint only, verified by the
 * HTTPS receiver of test/webhooks/support.ts (the standardwebhooks and svix packages in their
 * default mode, and the SDK); the select offers only the types the endpoint enabled. Over the
 * form post itself: a live endpoint has no button and its post is refused (403), a post without
 * the page's CSRF token or from another site's Origin is 403, and none of them records an event.
 * Screenshot: test-artifacts/portal-test-event.png.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { openChromium, requireChromium } from '../helpers/chromium.ts';
import { listeningApp } from '../helpers/listening.ts';
import { waitUntil } from '../helpers/wait.ts';
import { startReceiver } from '../webhooks/support.ts';
import { alertOf, signUp } from './support.ts';

requireChromium(t);
t.plan(2);
const { app, baseUrl } = await listeningApp(t, {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  SESSION_SECRET: 't'.repeat(40),
});
const receiver = await startReceiver(t);
const { page, shot } = await openChromium(t, { shotPrefix: 'portal-' });
const eventCount = async (appId: string, environment: 'sandbox' | 'live') =>
  (await app.services.events.forApp(appId, environment, { limit: 100 })).items.length;

t.test('in the browser: the chosen type, to this endpoint only, verified', async (t) => {
  await page.goto(`${baseUrl}/portal/signup`);
  await page.getByLabel('Username').fill(`tester_${randomBytes(3).toString('hex')}`);
  await page.getByLabel('Password').fill('a long enough password');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByLabel('App name').fill('Test events');
  await page.getByRole('button', { name: 'Create app' }).click();
  await page.getByRole('heading', { name: 'Test events', level: 1 }).waitFor();
  const appPath = new URL(page.url()).pathname;
  const appId = appPath.split('/').pop()!;
  const endpoints = {} as Record<'/one' | '/other' | '/archived', string>;
  for (const p of ['/one', '/other', '/archived'] as const) {
    const created = await app.services.endpoints.create({
      appId,
      env: 'sandbox',
      url: receiver.url(p),
      ...(p === '/archived' ? { enabledEvents: ['listing.archived'] } : {}),
    });
    receiver.secrets.set(p, created.secret);
    endpoints[p] = created.id;
  }

  await page.goto(`${baseUrl}${appPath}/webhooks/${endpoints['/archived']}`);
  t.strictSame(
    await page.getByLabel('Test event').locator('option').allTextContents(),
    ['listing.archived'],
    'only the types the endpoint enabled',
  );

  await page.goto(`${baseUrl}${appPath}/webhooks/${endpoints['/one']}`);
  const select = page.getByLabel('Test event');
  t.strictSame(
    await select.locator('option').allTextContents(),
    ['listing.created', 'listing.updated', 'listing.archived', 'listing.matched'],
    'every type for an endpoint of every type',
  );
  await select.selectOption('listing.matched');
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.getByRole('status').filter({ hasText: 'Test event sent' }).waitFor();
  t.match(new URL(page.url()).search, '?done=tested', 'post, then redirect');
  const got = await waitUntil('the test event at /one', () =>
    receiver.to('/one').find((r) => r.event?.type === 'listing.matched' || r.verifyError),
  );
  t.equal(got.verifyError, null, 'verified (standardwebhooks, svix, the SDK)');
  t.equal((got.event as { data: { test?: boolean } }).data.test, true, 'marked as a test');
  await page.reload();
  t.ok(
    await page.getByRole('cell', { name: 'listing.matched' }).first().isVisible(),
    'its delivery is listed on the page',
  );
  await shot('test-event');
  t.equal(receiver.to('/other').length, 0, "not to the app's other endpoint");
  t.equal(receiver.to('/archived').length, 0, 'nor to the one that did not enable it');
});

t.test('the form post: refused in live, without the CSRF token, from another Origin', async (t) => {
  const owner = await signUp(app);
  const created = await owner.browser.act('/portal/apps', '/portal/apps', { name: 'Live tests' });
  const appId = /apps\/([0-9a-f-]{36})/.exec(String(created.headers.location))![1]!;
  await app.services.apps.approve(appId);
  const live = await app.services.endpoints.create({
    appId,
    env: 'live',
    url: receiver.url('/live'),
  });
  const sandbox = await app.services.endpoints.create({
    appId,
    env: 'sandbox',
    url: receiver.url('/sandbox'),
  });
  const livePage = `/portal/apps/${appId}/webhooks/${live.id}`;
  const shown = await owner.browser.get(livePage);
  t.notMatch(shown.body, /Send test event/, 'a live endpoint: no button');
  t.match(shown.body, /Test events are sandbox only/, 'and why');
  const refused = await owner.browser.act(livePage, `${livePage}/test-event`, {
    type: 'listing.created',
  });
  t.equal(refused.statusCode, 403, 'a live endpoint: 403');
  t.match(alertOf(refused.body), /sandbox only/);

  const sandboxPage = `/portal/apps/${appId}/webhooks/${sandbox.id}`;
  const noToken = await owner.browser.post(`${sandboxPage}/test-event`, {
    type: 'listing.created',
  });
  t.equal(noToken.statusCode, 403, 'no CSRF token: 403');
  owner.browser.origin = 'https://evil.example';
  const foreign = await owner.browser.act(sandboxPage, `${sandboxPage}/test-event`, {
    type: 'listing.created',
  });
  t.equal(foreign.statusCode, 403, "another site's Origin: 403");
  t.match(foreign.body, /another site/);
  owner.browser.origin = undefined;

  const other = await signUp(app);
  const strangers = await other.browser.act(sandboxPage, `${sandboxPage}/test-event`, {
    type: 'listing.created',
  });
  t.not(strangers.statusCode, 303, "another developer's post is not sent");
  t.equal(await eventCount(appId, 'live'), 0, 'no live event recorded');
  t.equal(await eventCount(appId, 'sandbox'), 0, 'no sandbox event recorded');
  t.equal(receiver.to('/live').length + receiver.to('/sandbox').length, 0, 'nothing delivered');
});
