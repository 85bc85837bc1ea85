/**
 * Usage at a glance (issue #36), in a real headless Chromium against the real server process
 * (startServerProcess: `npm start`'s bundle) on a fresh database (PGlite directory, or PostgreSQL
 * with DATABASE_URL): a developer makes API calls with known outcomes, with a sandbox key (2xx,
 * 4xx, then until the rate limit answers 429) and with an OAuth access token of the app (live:
 * 2xx and a 404), and one long poll (`GET /api/v1/events?wait=1`); the Overview's chart shows
 * exactly those counts per outcome in its bars and its totals, in each environment, the long poll
 * counted apart ("1 long poll") and its y-axis ticks whole numbers; a click on a bar opens the
 * Request logs filtered to that hour and outcome, listing exactly the bar's requests; times sit
 * on one line and the filters in one row at 1,024 px, wrapping on a phone without sideways
 * scrolling; axe-core finds nothing serious.
 * Screenshots: test-artifacts/portal-usage-*.png at 1,280 and 390 px.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { outcomeOf, OUTCOMES, type Outcome } from '../../src/request-logs/usage.ts';
import { assertAccessible } from '../helpers/axe.ts';
import { freshDatabaseUrl } from '../helpers/app.ts';
import { openChromium, requireChromium } from '../helpers/chromium.ts';
import { listingBody } from '../helpers/listings.ts';
import { startServerProcess } from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';

requireChromium(t);

const scratch = mkdtempSync(path.join(tmpdir(), 'portal-usage-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const databaseUrl = await freshDatabaseUrl(t);
// 30 requests a second per credential (and per IP for the pages): a burst of calls with one key
// meets a 429 within a second, while the browser's pages stay well under it.
const RATE_LIMIT_MAX = 30;
const server = await startServerProcess(t, {
  LOG_LEVEL: 'warn',
  SESSION_SECRET: 'u'.repeat(40),
  RATE_LIMIT_MAX: String(RATE_LIMIT_MAX),
  RATE_LIMIT_WINDOW_MS: '1000',
  ...(databaseUrl === 'memory://'
    ? { PGLITE_DIR: path.join(scratch, 'pglite') }
    : { DATABASE_URL: databaseUrl }),
});
const base = server.base;

const { page, shot } = await openChromium(t, { shotPrefix: 'portal-usage-' });
/**
 * Opens a page of the portal. The pages share the per-IP limit of RATE_LIMIT_MAX a second with
 * their assets, which a fast machine's page loads in a row can reach: a 429 page is opened again
 * once the limit's window lets it (what is tested is the page, not the limiter).
 */
const go = (p: string) =>
  waitUntil(
    `${p} past the pages' rate limit`,
    async () => {
      const response = await page.goto(`${base}${p}`);
      return response?.status() === 429 ? undefined : { response };
    },
    { timeoutMs: 10_000, everyMs: 250 },
  );
/** After a click that navigated: the page it opened, again if the rate limit answered it. */
async function settled(): Promise<void> {
  if ((await page.title()).startsWith('Too many requests')) {
    const url = new URL(page.url());
    await go(`${url.pathname}${url.search}`);
  }
}

/** What each environment's calls answered, counted by the chart's outcomes. */
const made: Record<'sandbox' | 'live', Record<Outcome, number>> = {
  sandbox: { '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0 },
  live: { '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0 },
};
async function api(
  env: 'sandbox' | 'live',
  credential: string,
  method: string,
  p: string,
  body?: unknown,
): Promise<number> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: {
      authorization: `Bearer ${credential}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  await res.arrayBuffer();
  made[env][outcomeOf(res.status)] += 1;
  return res.status;
}

let appPath = '';
let sandboxKey = '';
let accessToken = '';
let longPath = '';

t.test('a developer, an app, a sandbox key and an OAuth token of the app', async (t) => {
  await go('/portal/signup');
  await page.getByLabel('Username').fill(`usage_${randomBytes(3).toString('hex')}`);
  await page.getByLabel('Password').fill('a long enough password');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByLabel('App name').fill('Usage at a glance');
  await page.getByRole('button', { name: 'Create app' }).click();
  await page.getByRole('heading', { name: 'Usage at a glance', level: 1 }).waitFor();
  appPath = new URL(page.url()).pathname;
  const appId = appPath.split('/').pop()!;
  await page.getByRole('button', { name: 'Create a sandbox key' }).click();
  sandboxKey = await page.locator('#new-key').inputValue();
  t.match(sandboxKey, /^svc_sandbox_/);

  await go(`${appPath}/oauth`);
  const redirectUri = 'https://client.example.com/callback';
  await page.getByLabel('Add a redirect URI').fill(redirectUri);
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await page.getByRole('button', { name: 'Create a client secret' }).click();
  const clientSecret = await page.locator('#client-secret').inputValue();
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  let redirected = '';
  await page.route('https://client.example.com/**', async (route) => {
    redirected = route.request().url();
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'client' });
  });
  await go(
    `/oauth/authorize?response_type=code&client_id=${appId}&redirect_uri=${encodeURIComponent(redirectUri)}&scope=read&state=s1&code_challenge=${challenge}&code_challenge_method=S256`,
  );
  await page.getByRole('button', { name: 'Allow' }).click();
  await page.waitForURL((url) => url.hostname === 'client.example.com');
  const code = new URL(redirected).searchParams.get('code')!;
  const token = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri,
      client_id: appId,
      client_secret: clientSecret,
      code_verifier: verifier,
    }),
  });
  accessToken = ((await token.json()) as { access_token: string }).access_token;
  t.match(accessToken, /^svc_oauth_/);
});

t.test('calls with known outcomes, 4xx, a 429 and the OAuth token included', async (t) => {
  t.equal(
    await api('sandbox', sandboxKey, 'POST', '/api/v1/listings', listingBody({ title: 'Seen' })),
    201,
  );
  for (let i = 0; i < 3; i += 1)
    t.equal(await api('sandbox', sandboxKey, 'GET', '/api/v1/listings'), 200);
  t.equal(await api('sandbox', sandboxKey, 'POST', '/api/v1/listings', { title: '' }), 400);
  t.equal(
    await api(
      'sandbox',
      sandboxKey,
      'GET',
      '/api/v1/listings/00000000-0000-4000-8000-000000000000',
    ),
    404,
  );
  // Bursts of twice the limit at once until the limit answers (a 1-second window: a burst that
  // falls across two windows may pass whole; the next one does not). Every answer is counted.
  for (let burst = 0; burst < 5 && made.sandbox['429'] === 0; burst += 1)
    await Promise.all(
      Array.from({ length: 2 * RATE_LIMIT_MAX }, () =>
        api('sandbox', sandboxKey, 'GET', '/api/v1/me'),
      ),
    );
  t.ok(made.sandbox['429'] >= 1, `the rate limit answered 429 (${made.sandbox['429']} times)`);
  // listen's long poll, shortened: within the limit's next window.
  await waitUntil(
    'a long poll past the rate limit',
    async () => (await api('sandbox', sandboxKey, 'GET', '/api/v1/events?wait=1')) === 200,
    { timeoutMs: 10_000, everyMs: 250 },
  );
  // A path as long as listen's (a cursor of 200 characters): the log's table must still fit.
  longPath = `/api/v1/events?wait=0&cursor=${'c'.repeat(200)}`;
  t.ok((await api('sandbox', sandboxKey, 'GET', longPath)) < 500, 'a long path, answered');

  for (let i = 0; i < 3; i += 1) t.equal(await api('live', accessToken, 'GET', '/api/v1/me'), 200);
  t.equal(
    await api('live', accessToken, 'GET', '/api/v1/listings/00000000-0000-4000-8000-000000000000'),
    404,
  );
  t.comment(`made: ${JSON.stringify(made)}`);
});

/** The chart's figures as shown: the totals beside it, and each outcome summed over its bars. */
async function shown(): Promise<{
  totals: Record<string, string>;
  bars: Record<string, number>;
  ticks: string[];
}> {
  return page.evaluate(() => {
    const totals: Record<string, string> = {};
    for (const dd of document.querySelectorAll<HTMLElement>('dl.usage-totals dd'))
      totals[dd.dataset.total!] = dd.textContent!.trim();
    const bars: Record<string, number> = {};
    for (const a of document.querySelectorAll<SVGAElement>('svg.usage-chart a'))
      bars[a.dataset.outcome!] = (bars[a.dataset.outcome!] ?? 0) + Number(a.dataset.count);
    const ticks = [...document.querySelectorAll('svg.usage-chart text.tick')].map(
      (e) => e.textContent!,
    );
    return { totals, bars, ticks };
  });
}

async function overview(env: 'sandbox' | 'live', t: Test) {
  const expected = made[env];
  const requests = OUTCOMES.reduce((sum, o) => sum + expected[o], 0);
  // The log is written every 50 ms, off the request's path: look again until it is there.
  let figures = {
    totals: {} as Record<string, string>,
    bars: {} as Record<string, number>,
    ticks: [] as string[],
  };
  await waitUntil(
    `${env}: ${requests} requests shown`,
    async () => {
      await go(`${appPath}?usage_env=${env}&usage_days=1`);
      figures = await shown();
      return figures.totals.requests === String(requests);
    },
    { timeoutMs: 10_000, everyMs: 250 },
  ).catch(() => {}); // the checks below say what is shown
  t.equal(figures.totals.requests, String(requests), `${env}: the total is the calls made`);
  for (const o of OUTCOMES) {
    if (o === '3xx') continue;
    t.equal(figures.bars[o] ?? 0, expected[o], `${env} ${o}: the bars hold the calls made`);
    t.equal(figures.totals[o], String(expected[o]), `${env} ${o}: the total beside the chart`);
  }
  const errors = expected['4xx'] + expected['429'] + expected['5xx'];
  t.match(
    figures.totals.error_rate,
    `${((errors / requests) * 100).toFixed(1)}%`,
    `${env}: the error rate`,
  );
  t.match(figures.totals.p95, /^\d+(\.\d)? ms$/, `${env}: a p95 latency`);
  if (env === 'sandbox')
    t.match(figures.totals.long_polls, /^1 long poll \(not in p50\/p95\)$/, 'apart');
  else t.equal(figures.totals.long_polls, undefined, 'live: no long poll, none shown');
  t.ok(
    figures.ticks.length >= 2 && figures.ticks.every((n) => /^\d[\d,]*$/.test(n)),
    `${env}: the y-axis ticks are whole requests (${figures.ticks.join(', ')})`,
  );
}

t.test('the Overview: the bars and totals are the calls made, per environment', async (t) => {
  await overview('live', t);
  await overview('sandbox', t);
  await page.getByText('The figures as a table').click();
  const row = page.locator('details.usage-table tbody tr').last();
  t.match(await row.textContent(), /\d{4}-\d{2}-\d{2} \d{2}:00/, 'the table has the hours');
  await assertAccessible(t, page, 'overview with usage');
  await shot('overview-1280');
  await page.setViewportSize({ width: 390, height: 844 });
  await go(appPath);
  const sideways = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  t.ok(sideways <= 0, `no sideways scrolling on a phone (overflow ${sideways}px)`);
  await shot('overview-390');
  await page.setViewportSize({ width: 1280, height: 900 });
});

t.test("a bar's click opens the Request logs of its hour and outcome", async (t) => {
  await go(`${appPath}?usage_env=sandbox&usage_days=1`);
  for (const outcome of ['4xx', '429'] as const) {
    await go(`${appPath}?usage_env=sandbox&usage_days=1`);
    const segment = page.locator(`svg.usage-chart a[data-outcome="${outcome}"]`).last();
    const count = Number(await segment.getAttribute('data-count'));
    const start = (await segment.getAttribute('data-start'))!;
    await segment.locator('rect').click();
    await page.waitForURL(/\/logs\?/);
    await settled();
    const url = new URL(page.url());
    t.equal(url.searchParams.get('hour'), `${start.slice(0, 13)}:00Z`, `${outcome}: its hour`);
    t.equal(
      await page.getByLabel('Status').inputValue(),
      outcome === '4xx' ? '4xx-not-429' : '429',
      'the status filter shows the outcome',
    );
    t.match(await page.locator('.period-filter').textContent(), /Only requests of/);
    const statuses = (await page.locator('tbody tr td:nth-child(4)').allTextContents()).map(Number);
    t.equal(statuses.length, Math.min(25, count), `${outcome}: the bar's ${count} requests`);
    t.ok(
      statuses.every((s) => outcomeOf(s) === outcome),
      `${outcome}: only that outcome (${[...new Set(statuses)].join(', ')})`,
    );
  }
});

t.test('the last 14 days: the same calls, and a day bar opens that day', async (t) => {
  await go(`${appPath}?usage_env=sandbox&usage_days=14`);
  const figures = await shown();
  t.equal(
    figures.totals.requests,
    String(OUTCOMES.reduce((sum, o) => sum + made.sandbox[o], 0)),
    'the days hold the same calls',
  );
  t.equal(figures.bars['429'], made.sandbox['429']);
  const segment = page.locator('svg.usage-chart a[data-outcome="2xx"]').last();
  const count = Number(await segment.getAttribute('data-count'));
  const start = (await segment.getAttribute('data-start'))!;
  t.match(
    await segment.getAttribute('aria-label'),
    /requests? of \d+ \(p50 [\d.]+ ms, p95 [\d.]+ ms without 1 long poll\)/,
    "each part names its bar's latency, and the long poll it left out",
  );
  await segment.locator('rect').click();
  await page.waitForURL(/\/logs\?/);
  await settled();
  t.equal(new URL(page.url()).searchParams.get('day'), start.slice(0, 10), 'its UTC day');
  t.equal(
    await page.locator('caption').textContent(),
    count > 25
      ? 'Showing the newest 25 sandbox requests; older ones on the next pages'
      : `${count} sandbox request${count === 1 ? '' : 's'}`,
  );
  await assertAccessible(t, page, 'request logs of a day');
});

t.test('the Request logs read on one screen', async (t) => {
  await go(`${appPath}/logs?env=sandbox`);
  const lines = await page.evaluate(() =>
    [...document.querySelectorAll('td.time time')].map((e) => e.getClientRects().length),
  );
  t.ok(lines.length > 0 && lines.every((n) => n === 1), 'every time is on one line');
  t.match(
    await page.locator('td.time time').first().getAttribute('title'),
    /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/,
    'the exact time on hover',
  );
  await assertAccessible(t, page, 'request logs');
  await shot('logs-1280');
  // At 1,280 px, with the long path on the page: every column in view (the Credential column
  // was cut off), the page not scrolling sideways; the caption says it is a page, not a total.
  t.ok(await page.getByText(longPath.slice(0, 40)).count(), 'the long path is on this page');
  const fit = await page.evaluate(() => {
    const wrap = document.querySelector('.table-wrap')!;
    const credential = [...wrap.querySelectorAll('thead th')].at(-1)!;
    return {
      hidden: wrap.scrollWidth - wrap.clientWidth,
      page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      header: credential.textContent,
      inside: credential.getBoundingClientRect().right <= wrap.getBoundingClientRect().right + 1,
    };
  });
  t.equal(fit.header, 'Credential');
  t.ok(fit.hidden <= 0 && fit.inside, `the table fits its box (${fit.hidden}px hidden)`);
  t.ok(fit.page <= 0, `the page does not scroll sideways (${fit.page}px)`);
  t.equal(
    await page.locator('caption').textContent(),
    'Showing the newest 25 sandbox requests; older ones on the next pages',
    'more pages: "showing", not a total',
  );
  await go(`${appPath}/logs?env=sandbox&status=4xx-not-429`);
  t.equal(
    await page.locator('caption').textContent(),
    `${made.sandbox['4xx']} sandbox requests`,
    'the whole list: its total',
  );
  t.equal(await page.getByRole('link', { name: /Older requests/ }).count(), 0);
  await go(`${appPath}/logs?env=sandbox`);

  const rowsOf = async () =>
    page.evaluate(() => {
      const tops = [
        ...document.querySelectorAll('form.filter .field, form.filter button[type=submit]'),
      ].map((e) => Math.round(e.getBoundingClientRect().top));
      const besides = [...document.querySelectorAll('form.filter .field')].every((f) => {
        const [label, field] = [f.querySelector('label')!, f.querySelector('select, input')!];
        const l = label.getBoundingClientRect();
        const c = field.getBoundingClientRect();
        return l.right <= c.left + 1 && l.bottom > c.top && l.top < c.bottom;
      });
      // A new row starts where an item sits lower than the one before by more than a few px.
      const rows = tops.filter((top, i) => i === 0 || top > tops[i - 1]! + 8).length;
      return { rows, besides };
    });
  await page.setViewportSize({ width: 1024, height: 800 });
  const wide = await rowsOf();
  await shot('logs-1024');

  t.equal(wide.rows, 1, 'the filters are one row at 1,024 px');
  t.ok(wide.besides, 'each label beside its field');

  await page.setViewportSize({ width: 390, height: 844 });
  const narrow = await rowsOf();
  t.ok(narrow.besides, 'on a phone, labels still beside their fields');
  const sideways = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  t.ok(sideways <= 0, `no sideways scrolling on a phone (overflow ${sideways}px)`);
  await shot('logs-390');
});
