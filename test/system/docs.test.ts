/**
 * The API reference at /docs (src/system/docs-plugin.ts, docs/api.md) in a real headless Chromium
 * with the network closed: every request that is not to this machine is aborted, and the test
 * fails if the page even tried one. It finds every operation, webhook and schema of the served
 * document (its heading shown at once, before Scalar's script arrives; a short introduction
 * linking to each group's rules), the listings operations with their examples, the events list's
 * `wait` with its example, and the security schemes, under the page's Content-Security-Policy
 * with no violation reported, and leaves screenshots in test-artifacts/ (docs-first-paint.png,
 * docs-overview.png, docs-listings-rules.png, docs-list-listings.png, docs-search-example.png,
 * docs-auth.png, docs-test-request.png, docs-link-from-login.png).
 *
 * Chromium is Debian's (/usr/bin/chromium, installed by .ci/run); without it the test is skipped
 * locally and fails under CI.
 */
import t from 'tap';
import { listeningApp } from '../helpers/listening.ts';
import { openChromium, requireChromium } from '../helpers/chromium.ts';

requireChromium(t);

type Doc = {
  paths: Record<string, Record<string, { summary?: string; operationId?: string }>>;
  webhooks: Record<string, unknown>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

// The page is opened as http://docs.example.test:PORT, a public-looking name that Chromium maps
// to 127.0.0.1 itself: nothing in the page can behave differently for "localhost", and a
// request that would go through a third-party proxy would show up as offsite.
const HOST = 'docs.example.test';
const { baseUrl, localUrl } = await listeningApp(t, {}, { publicHost: HOST });
const document = (await (await fetch(`${localUrl}/api/v1/openapi.json`)).json()) as Doc;

const isLocal = (url: URL) => [HOST, '127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
const { context, page, shot } = await openChromium(t, {
  profile: true,
  viewport: { width: 1400, height: 1000 },
  args: [`--host-resolver-rules=MAP ${HOST} 127.0.0.1`],
  shotPrefix: 'docs-',
});

// The network is closed: only this machine answers. Anything else is recorded and aborted.
const offsite: string[] = [];
const failed: string[] = [];
await context.route('**/*', async (route) => {
  const url = new URL(route.request().url());
  if (url.protocol === 'data:' || url.protocol === 'blob:' || isLocal(url)) return route.continue();
  offsite.push(url.href);
  return route.abort('internetdisconnected');
});
context.on('response', (response) => {
  if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
});

// Every Content-Security-Policy violation the pages report (the DOM event, from the start of
// each page), e.g. "script-src-elem inline at ..." for a blocked inline script.
const violations: string[] = [];
await context.exposeFunction('reportCspViolation', (violation: string) =>
  violations.push(violation),
);
await context.addInitScript(() => {
  // Runs in the page (`document` here is the test's OpenAPI document, hence globalThis).
  type Violation = {
    effectiveDirective: string;
    blockedURI: string;
    sourceFile: string;
    lineNumber: number;
  };
  const page = globalThis as unknown as {
    document: EventTarget;
    reportCspViolation(violation: string): void;
  };
  page.document.addEventListener('securitypolicyviolation', (event) => {
    const v = event as unknown as Violation;
    page.reportCspViolation(
      `${v.effectiveDirective} ${v.blockedURI} at ${v.sourceFile}:${v.lineNumber}`,
    );
  });
});
/**
 * The one violation the policy means to cause: Scalar bundles Zod 4, which probes once per page
 * whether it may compile validators (`try { Function('') } catch { use the interpreter }`).
 * Without 'unsafe-eval' the probe fails and Zod validates without compiling.
 */
const ZOD_EVAL_PROBE = /^script-src eval at https?:\/\/[^/]+\/docs\/js\/scalar\.js:\d+$/;

const sidebar = () => page.locator('aside, nav').first();

t.test('the page shows its heading before the 4 MB script has even arrived', async (t) => {
  // Scalar's script is held back until the page has shown what it can without it.
  let release!: () => void;
  const released = new Promise<void>((done) => (release = done));
  let requested = false;
  await page.route('**/docs/js/scalar.js', async (route) => {
    requested = true;
    await released;
    await route.continue();
  });
  await page.goto(`${baseUrl}/docs/`, { waitUntil: 'commit' });
  const heading = page.getByRole('heading', { name: 'Marketplace Listings API reference' });
  await heading.waitFor({ state: 'visible', timeout: 15_000 });
  const status = page.getByRole('status');
  t.match(await status.innerText(), /Loading the interactive reference/, 'says it is loading');
  t.ok(await page.getByRole('link', { name: 'openapi.json' }).isVisible(), 'links the document');
  t.ok(requested, 'while the script was asked for and not yet answered');
  await shot('first-paint', { fullPage: false });
  release();
  await page.getByText('List listings').first().waitFor({ timeout: 30_000 });
  await page.locator('.docs-first-paint').waitFor({ state: 'detached', timeout: 15_000 });
  t.pass('then the reference replaces it');
  await page.unroute('**/docs/js/scalar.js');
});

t.test('GET /docs renders the served document from this server alone', async (t) => {
  const response = await page.goto(`${baseUrl}/docs`, { waitUntil: 'networkidle' });
  t.equal(response?.status(), 200, '/docs redirects to the page');
  const policy = (await response?.allHeaders())?.['content-security-policy'] ?? '';
  t.match(
    policy,
    /default-src 'none'/,
    'the page has a Content-Security-Policy that denies by default',
  );
  t.match(
    policy,
    /script-src 'self' 'sha256-[A-Za-z0-9+/=]+'(;|$)/,
    "scripts: this server and the page's own inline script, by hash",
  );
  t.match(policy, /frame-ancestors 'none'/);
  await page.getByText('List listings').first().waitFor({ timeout: 30_000 });
  await shot('overview', { fullPage: false });

  const nav = await sidebar().innerText();
  const summaries = Object.values(document.paths).flatMap((item) =>
    Object.values(item).map((op) => op.summary ?? op.operationId),
  );
  t.ok(summaries.length >= 15, `${summaries.length} operations in the document`);
  const missing = summaries.filter((summary) => summary && !nav.includes(summary));
  t.same(missing, [], 'every operation is in the navigation');
  const webhooks = Object.keys(document.webhooks);
  t.same(
    webhooks.filter((name) => !nav.includes(name)),
    [],
    `the webhooks (${webhooks.join(', ')}) are in the navigation`,
  );
  const schemas = Object.keys(document.components.schemas);
  t.same(
    schemas.filter((name) => !nav.includes(name)),
    [],
    `every schema (${schemas.length}) is listed under Models`,
  );
});

t.test('a short introduction; each group opens with the rules of its part', async (t) => {
  const intro = (document as unknown as { info: { description: string } }).info.description;
  t.ok(intro.length < 16_000, `the introduction is ${intro.length} characters (it was 41,919)`);
  await page.goto(`${baseUrl}/docs/`, { waitUntil: 'networkidle' });
  await page.getByRole('link', { name: 'Listings', exact: true }).first().click();
  const heading = page.getByRole('heading', { name: 'Search and sync' }).first();
  await heading.waitFor({ state: 'visible', timeout: 15_000 });
  t.match(page.url(), /#tag\/listings/, 'the introduction links to the Listings group');
  t.ok(
    await page
      .getByText('searches, filters, sorts and syncs the listings', { exact: false })
      .first()
      .isVisible(),
    'which opens with "Search and sync"',
  );
  await heading.scrollIntoViewIfNeeded();
  await shot('listings-rules', { fullPage: false });
});

t.test('the events list shows its long-polling parameter, wait, with an example', async (t) => {
  await page.getByText("List the app's events").first().click();
  const operation = page
    .locator('section', { hasText: 'listEvents' })
    .filter({ hasText: 'Query Parameters' })
    .first();
  await operation.waitFor({ timeout: 15_000 });
  const text = await operation.innerText();
  const wait = text.slice(text.search(/^wait$/m));
  t.match(text, /^wait$/m, 'the wait parameter');
  t.match(wait, /^Type:\s*integer\s*min:\s*0\s*max:\s*30$/m, 'an integer, 0 to 30');
  t.match(wait, /Long polling: wait up to this many seconds/, 'with its description');
  // Its example sits behind an "Example" button in the parameter's list item.
  const buttons = operation.locator('button.property-example-label');
  const owners = await buttons.evaluateAll((all) =>
    all.map((b) => (b.closest('li') as HTMLElement | null)?.innerText.split('\n')[0] ?? ''),
  );
  t.ok(owners.includes('wait'), `an Example button for wait (${owners.join(', ')})`);
  const example = buttons.nth(owners.indexOf('wait'));
  await example.click();
  const shown = await example.locator('xpath=..').innerText();
  t.match(shown, /\b25\b/, 'and its example, 25');
});

t.test('the listings operations, with parameters and examples', async (t) => {
  await page.getByText('List listings').first().click();
  const section = page
    .locator('section', { hasText: 'Query Parameters' })
    .filter({ hasText: 'next_cursor' })
    .first();
  await section.waitFor({ timeout: 15_000 });
  const text = await section.innerText();
  t.match(text, /limit/, 'the limit parameter');
  t.match(text, /cursor/, 'the cursor parameter');
  // The operation's own section lists each parameter by name on a line of its own.
  const operation = await page
    .locator('section', { hasText: 'listListings' })
    .filter({ hasText: 'Query Parameters' })
    .first()
    .innerText();
  const search = ['q', 'category', 'condition', 'tag', 'min_price_cents', 'seller', 'sort'];
  for (const name of [...search, 'status', 'updated_since'])
    t.match(operation, new RegExp(`^${name}$`, 'm'), `the search parameter ${name}`);
  // The first response example of GET /api/v1/listings in the document.
  await page.getByText('Patagonia Better Sweater fleece').first().waitFor({ timeout: 15_000 });
  await shot('list-listings', { fullPage: false });
  // The worked search example, picked from the response examples' menu: its page and its
  // opaque next_cursor.
  await page
    .getByRole('button', { name: /^Anonymous, GET \/api\/v1\/listings\?limit=2/ })
    .first()
    .click();
  await page
    .getByRole('option', { name: /^A search, GET \/api\/v1\/listings\?q=denim\+jacket&/ })
    .first()
    .click();
  const searched = page.getByText('Cropped denim jacket').first();
  await searched.waitFor({ timeout: 15_000 });
  t.ok(
    await page.getByText(/"eyJ2IjoxLCJk[A-Za-z0-9_-]+"/).count(),
    'the search example with its opaque next_cursor',
  );
  await searched.scrollIntoViewIfNeeded();
  await shot('search-example', { fullPage: false });

  await page.getByText('Create (or upsert) a listing').first().click();
  await page.getByText('Idempotency-Key').first().waitFor({ timeout: 15_000 });
  const body = await page.locator('body').innerText();
  for (const expected of [
    'Create (or upsert) a listing',
    'Archive a listing',
    'Update a listing',
    'Get a listing',
  ]) {
    t.ok(body.includes(expected), `${expected} is rendered`);
  }
});

t.test('the security schemes and a webhook', async (t) => {
  await page.goto(`${baseUrl}/docs/`, { waitUntil: 'networkidle' });
  await page.getByText('Select Auth Type').filter({ visible: true }).first().click();
  const menu = page.locator('[role="listbox"], [role="menu"], [role="dialog"]').last();
  await menu.waitFor({ timeout: 15_000 });
  const options = await menu.innerText();
  for (const scheme of Object.keys(document.components.securitySchemes)) {
    t.ok(options.includes(scheme), `security scheme ${scheme} is offered`);
  }
  await shot('auth', { fullPage: false });
  await page.keyboard.press('Escape');

  await page.getByText('listing.created').first().click();
  await page.getByText('X-Service-Signature').first().waitFor({ timeout: 15_000 });
  t.pass('the listing.created webhook shows its signature header');
});

t.test('"Test Request" sends to this server directly, with no proxy in between', async (t) => {
  const reached: string[] = [];
  page.on('request', (request) => {
    if (request.url().includes('/api/v1/health')) reached.push(request.url());
  });
  await page.goto(`${baseUrl}/docs/`, { waitUntil: 'networkidle' });
  await page.getByText('Health check').first().click();
  await page
    .getByRole('button', { name: /Test Request/ })
    .first()
    .click();
  // The client's own Send button (its dialog's, not an operation of the sidebar whose summary
  // starts with the same word: "Send a test event").
  await page
    .getByRole('dialog', { name: 'API Client' })
    .getByRole('button', { name: /^Send(?! a test event)/ })
    .first()
    .click();
  await page.getByText('200 OK').first().waitFor({ timeout: 15_000 });
  await shot('test-request', { fullPage: false });
  t.ok(
    reached.some((url) => url.startsWith(`${baseUrl}/api/v1/health`)),
    'the request went to BASE_URL',
  );
  await page.keyboard.press('Escape');
});

t.test('the site header of the pages (sign-in, portal) links to the reference', async (t) => {
  await page.goto(`${baseUrl}/login`, { waitUntil: 'networkidle' });
  await shot('link-from-login', { fullPage: false });
  await page.getByRole('link', { name: 'API reference' }).click();
  await page.getByText('List listings').first().waitFor({ timeout: 30_000 });
  t.match(new URL(page.url()).pathname, /^\/docs\/?$/, 'the link opens /docs');
});

t.test(
  'nothing was fetched from outside this machine, nothing failed, nothing broke the policy',
  async (t) => {
    t.same(offsite, [], 'no request left the machine');
    t.same(failed, [], 'no request failed');
    t.same(
      violations.filter((v) => !ZOD_EVAL_PROBE.test(v)),
      [],
      "no Content-Security-Policy violation but Zod's eval probe",
    );
  },
);
