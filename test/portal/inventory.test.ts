/**
 * The sandbox inventory page: the app owner's sandbox listings, exactly what the owner's
 * sandbox key gets from GET /api/v1/listings (same isolation rule), filtered by status and
 * paged by keyset links; never a live listing or another seller's.
 */
import t from 'tap';
import { unescapeHtml } from '../helpers/browser.ts';
import { alertOf, appWithLog, createApp, shownSecret, signUp } from './support.ts';

const { app } = await appWithLog(t);

const api = async (method: 'GET' | 'POST' | 'DELETE', url: string, key: string, body?: unknown) => {
  const res = await app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: JSON.parse(res.body) as any };
};

const user = await signUp(app);
const appId = await createApp(user, 'Inventory app');
const otherAppId = await createApp(user, 'Second app');
const inventoryUrl = `/portal/apps/${appId}/inventory`;

async function keyFor(id: string, env: 'sandbox' | 'live'): Promise<string> {
  const res = await user.browser.act(`/portal/apps/${id}/keys`, `/portal/apps/${id}/keys`, {
    env,
    scopes: ['read', 'listings:write'],
  });
  const key = shownSecret(res.body, 'new-key');
  if (!key) throw new Error(`no key: ${alertOf(res.body)}`);
  return key;
}

const sandboxKey = await keyFor(appId, 'sandbox');
const items = Array.from({ length: 22 }, (_, i) =>
  i % 3 === 0
    ? {
        title: `Active item ${i}`,
        price_cents: 1000 + i,
        status: 'active',
        cover_image_url: 'https://images.example.com/a.jpg',
      }
    : { title: `Draft item ${i}`, price_cents: 1000 + i },
);
const batch = await api('POST', '/api/v1/listings/batch', sandboxKey, { items });
if (batch.status !== 200 || batch.body.meta.created !== 22)
  throw new Error(`batch failed: ${JSON.stringify(batch.body)}`);
const ids: string[] = batch.body.data.results.map((r: { data: { id: string } }) => r.data.id);
for (const id of ids.slice(1, 3)) await api('DELETE', `/api/v1/listings/${id}`, sandboxKey);
const fromOtherApp = await api('POST', '/api/v1/listings', await keyFor(otherAppId, 'sandbox'), {
  title: '<b>Other app</b> & co',
  price_dollars: 3,
});
const liveListing = await api('POST', '/api/v1/listings', await keyFor(appId, 'live'), {
  title: 'A live listing',
  price_cents: 900,
});
const stranger = await signUp(app);
const strangerApp = await createApp(stranger);
const strangerKey = shownSecret(
  (
    await stranger.browser.act(
      `/portal/apps/${strangerApp}/keys`,
      `/portal/apps/${strangerApp}/keys`,
      { env: 'sandbox', scopes: ['listings:write'] },
    )
  ).body,
  'new-key',
)!;
const strangers = await api('POST', '/api/v1/listings', strangerKey, {
  title: 'Somebody else',
  price_cents: 100,
});

const idsOf = (html: string) =>
  [...html.matchAll(/<code class="small-id">([0-9a-f-]{36})<\/code>/g)].map((m) => m[1]!);
const nextOf = (html: string) => {
  const match = /<a href="([^"]+)" rel="next">/.exec(html);
  return match?.[1] === undefined ? undefined : unescapeHtml(match[1]);
};

/** What the sandbox key sees on the API, every page. */
async function apiFeed(): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page = await api(
      'GET',
      `/api/v1/listings?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      sandboxKey,
    );
    seen.push(...page.body.data.map((l: { id: string }) => l.id));
    cursor = page.body.meta.next_cursor;
  } while (cursor);
  return seen;
}

t.test("pages of 20, newest first: exactly the sandbox key's feed", async (t) => {
  const first = await user.browser.get(inventoryUrl);
  t.equal(first.statusCode, 200);
  t.match(first.body, /aria-current="page">Inventory</);
  const page1 = idsOf(first.body);
  t.equal(page1.length, 20);
  t.match(first.body, /<caption>20 listings<\/caption>/);
  const next = nextOf(first.body);
  t.ok(next, 'a link to older listings');
  t.match(next, /^\/portal\/apps\/[0-9a-f-]+\/inventory\?cursor=\d{4}-/);

  const second = await user.browser.get(next!);
  const page2 = idsOf(second.body);
  t.equal(nextOf(second.body), undefined, 'the last page has no next link');
  t.match(
    second.body,
    new RegExp(`<a href="${inventoryUrl}">Newest</a>`),
    'but a link back to the newest',
  );

  const all = [...page1, ...page2];
  t.equal(new Set(all).size, all.length, 'no listing twice');
  t.same(
    all,
    await apiFeed(),
    'the same listings in the same order as GET /api/v1/listings with the sandbox key',
  );
  t.equal(all.length, 23, "22 of this app and 1 of the owner's other app");
  t.ok(
    all.includes(fromOtherApp.body.data.id),
    "the owner's other app's sandbox listing is there (the owner's inventory)",
  );
  t.notOk(all.includes(liveListing.body.data.id), 'never a live listing');
  t.notOk(all.includes(strangers.body.data.id), "never another seller's");
  t.match(first.body, /&lt;b&gt;Other app&lt;\/b&gt; &amp; co/, 'titles are escaped');
  t.match(first.body, /<td class="num">10\.21 USD<\/td>/, 'prices in dollars');
});

t.test('the status filter, with paging inside it', async (t) => {
  const active = await user.browser.get(`${inventoryUrl}?status=active`);
  const activeIds = idsOf(active.body);
  t.equal(activeIds.length, 8);
  t.match(
    active.body,
    /<option value="active" selected>active<\/option>/,
    'the filter shows what is selected',
  );
  t.match(active.body, /<caption>8 listings with status active<\/caption>/);
  t.notMatch(active.body, /listing-draft|listing-archived/);

  const archived = idsOf((await user.browser.get(`${inventoryUrl}?status=archived`)).body);
  t.same(archived.sort(), ids.slice(1, 3).sort(), 'the two archived ones');

  const drafts = await user.browser.get(`${inventoryUrl}?status=draft`);
  t.equal(idsOf(drafts.body).length, 13, '12 drafts of this app + 1 of the other app');
  t.equal(nextOf(drafts.body), undefined);
  t.equal(
    (await user.browser.get(`/portal/apps/${strangerApp}/inventory`)).statusCode,
    404,
    "another user's app: not found",
  );

  const all = await user.browser.get(`${inventoryUrl}?status=`);
  t.equal(idsOf(all.body).length, 20, 'an empty status is all');
  t.notMatch(nextOf(all.body)!, /status=/, 'the next link of "all" has no status');
});

t.test('paging keeps the filter', async (t) => {
  const key = sandboxKey;
  const more = Array.from({ length: 20 }, (_, i) => ({
    title: `More draft ${i}`,
    price_cents: 200 + i,
  }));
  t.equal((await api('POST', '/api/v1/listings/batch', key, { items: more })).status, 200);
  const first = await user.browser.get(`${inventoryUrl}?status=draft`);
  t.equal(idsOf(first.body).length, 20);
  const next = nextOf(first.body)!;
  t.match(next, /\?status=draft&cursor=/);
  const second = await user.browser.get(next);
  t.equal(idsOf(second.body).length, 13);
  t.notMatch(second.body, /listing-active|listing-archived/);
  t.match(second.body, /<caption>13 listings with status draft, older page<\/caption>/);
});

t.test("a bad status or cursor is refused with the service's words", async (t) => {
  const badStatus = await user.browser.get(`${inventoryUrl}?status=sold`);
  t.equal(badStatus.statusCode, 400);
  t.equal(alertOf(badStatus.body), 'query.status must be one of draft, active, archived');
  const badCursor = await user.browser.get(`${inventoryUrl}?cursor=yesterday`);
  t.equal(badCursor.statusCode, 400);
  t.equal(alertOf(badCursor.body), 'query.cursor must be an ISO 8601 timestamp');
  t.match(badCursor.body, new RegExp(`<a href="${inventoryUrl}">Newest</a>`), 'with a way back');
});

t.test('an empty inventory says how to fill it', async (t) => {
  const empty = await stranger.browser.get(`/portal/apps/${strangerApp}/inventory?status=archived`);
  t.equal(empty.statusCode, 200);
  t.match(empty.body, /No archived sandbox listings\./);
  const none = await (await signUp(app)).browser;
  const fresh = await createApp({ browser: none, username: '', password: '' });
  t.match(
    (await none.get(`/portal/apps/${fresh}/inventory`)).body,
    /No sandbox listings yet\. Create one with a sandbox key/,
  );
});
