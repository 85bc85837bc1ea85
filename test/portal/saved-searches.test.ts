/**
 * The Saved searches page (src/portal/saved-searches-pages.ts): an app's saved searches per
 * environment, made through its keys and through a user's OAuth token, each with its name
 * (escaped), its search in words, created and last match ("never" until the matcher records
 * one), who made it; delete by a CSRF-carrying POST; another app's saved search is not found.
 */
import t from 'tap';
import { Browser } from '../helpers/browser.ts';
import { waitUntil } from '../helpers/wait.ts';
import { createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';
import { alertOf, createApp, noticeOf, signUp } from './support.ts';

const app = await webhooksApp(t);
// The app's owner signs up and makes the app in the portal; the app is also an OAuth client.
const owner = await signUp(app);
const appId = await createApp(owner, 'Alerts app');
const redirectUri = 'https://client.example.com/callback';
await app.services.apps.addRedirectUri(appId, redirectUri);
const client = {
  clientId: appId,
  clientSecret: (await app.services.apps.rotateClientSecret(appId)).client_secret,
  redirectUri,
  ownerUsername: owner.username,
  name: 'Alerts app',
};
await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
await app.services.apps.approve(client.clientId);
const keyOf = async (env: 'sandbox' | 'live') =>
  (
    await app.services.keys.create({
      appId: client.clientId,
      env,
      scopes: 'read listings:write searches',
    })
  ).key;
const sandboxKey = await keyOf('sandbox');
const liveKey = await keyOf('live');
const endUser = await createEndUser(app);
const token = (
  await exchange(
    app,
    client,
    await obtainCode(new Browser(app), client, endUser, { scope: 'read searches' }),
  )
).json().access_token as string;

async function save(credential: string, body: Json): Promise<Json> {
  const res = await api(app, 'POST', '/api/v1/saved_searches', credential, body);
  if (res.status !== 201) throw new Error(`save: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

const tricky = await save(sandboxKey, {
  name: '<b>Jackets</b> & "co"',
  q: 'jacket',
  brand: 'Barbour',
  size: 'M',
  condition: ['like_new', 'good'],
  tag: ['denim'],
  max_price_cents: 8000,
});
const coats = await save(sandboxKey, { name: 'Coats', q: 'coat' });
const live = await save(liveKey, { name: 'Live boots', q: 'boots', min_price_cents: 1000 });
const viaToken = await save(token, {
  name: 'Token boots',
  q: 'boots',
  seller: client.ownerUsername,
});

// A real match: a sandbox listing of the app's developer that the 'Coats' search matches.
const listing = await api(app, 'POST', '/api/v1/listings', sandboxKey, {
  title: 'Warm wool coat',
  price_cents: 4500,
  status: 'active',
  cover_image_url: 'https://images.example.com/coat.jpg',
});
if (listing.status !== 201) throw new Error(`listing: ${listing.status}`);
// Matched by this pass or by the server's own matcher (which may hold the queue's row).
await waitUntil('the Coats search matched', async () => {
  await app.services.matcher!.pass('light');
  const res = await api(app, 'GET', `/api/v1/saved_searches/${coats.id}`, sandboxKey);
  return res.body.data.last_matched_at !== null;
});

const page = (env: string) => `/portal/apps/${client.clientId}/saved-searches?env=${env}`;

/** The table row of a saved search on a page. */
function rowOf(html: string, id: unknown): string {
  const row = html.split('<tr>').find((r) => r.includes(String(id)));
  if (!row) throw new Error(`no row for ${String(id)}`);
  return row;
}

t.test('sandbox: names escaped, the search in words, last match, made through a key', async (t) => {
  const res = await owner.browser.get(page('sandbox'));
  t.equal(res.statusCode, 200);
  t.match(
    res.body,
    /<a href="\/portal\/apps\/[^"]+\/saved-searches" aria-current="page">Saved searches<\/a>/,
    'its tab',
  );
  t.notMatch(res.body, /<b>Jackets/, 'no markup from a name');
  const first = rowOf(res.body, tricky.id);
  t.match(first, /&lt;b&gt;Jackets&lt;\/b&gt; &amp; &quot;co&quot;/);
  t.match(
    first,
    /“jacket” · brand Barbour · size M · condition good or like_new · tagged denim · price up to 80.00/,
  );
  t.match(first, /An API key/);
  t.match(first, /<span class="muted">never<\/span>/, 'no match yet: never');
  t.match(first, /<time datetime="[^"]+">/, 'created');
  const matched = rowOf(res.body, coats.id);
  t.match(matched, /“coat”/);
  t.equal((matched.match(/<time datetime=/g) ?? []).length, 2, 'created and last match');
  t.notOk(res.body.includes(String(live.id)), 'live searches are on the live page');
  t.match(rowOf(res.body, coats.id), /name="csrf_token"/, 'the delete form carries CSRF');
});

t.test("live: a key's and a user's token's, each saying which", async (t) => {
  const res = await owner.browser.get(page('live'));
  t.equal(res.statusCode, 200);
  t.match(rowOf(res.body, live.id), /An API key/);
  t.match(rowOf(res.body, live.id), /price from 10.00/);
  t.match(rowOf(res.body, viaToken.id), /A user&#39;s OAuth token|A user's OAuth token/);
  t.match(rowOf(res.body, viaToken.id), new RegExp(`seller @${client.ownerUsername}`));
  t.notOk(res.body.includes(String(tricky.id)));
});

t.test('delete: POST with the CSRF token, then gone for the page and the API', async (t) => {
  const deleteViaToken = () =>
    owner.browser.act(page('live'), `/portal/apps/${client.clientId}/saved-searches/delete`, {
      saved_search_id: String(viaToken.id),
      env: 'live',
    });
  const res = await deleteViaToken();
  t.equal(res.statusCode, 303);
  const after = await owner.browser.get(String(res.headers.location));
  t.equal(noticeOf(after.body), 'The saved search was deleted: it matches nothing from now on.');
  t.notOk(after.body.includes(String(viaToken.id)));
  t.equal((await api(app, 'GET', `/api/v1/saved_searches/${viaToken.id}`, token)).status, 404);

  const again = await deleteViaToken();
  t.equal(again.statusCode, 404, 'deleting it again: not found');
  t.equal(alertOf(again.body), `No saved search with id ${viaToken.id}.`);

  const forged = await owner.browser.post(`/portal/apps/${client.clientId}/saved-searches/delete`, {
    saved_search_id: String(live.id),
    env: 'live',
  });
  t.equal(forged.statusCode, 403, 'no CSRF token: refused');
  t.equal((await api(app, 'GET', `/api/v1/saved_searches/${live.id}`, liveKey)).status, 200);
});

t.test("another user's app: its page and its saved searches are not found", async (t) => {
  const stranger = await signUp(app);
  const theirs = await createApp(stranger);
  t.equal((await stranger.browser.get(page('sandbox'))).statusCode, 404);
  const res = await stranger.browser.act(
    `/portal/apps/${theirs}/saved-searches`,
    `/portal/apps/${theirs}/saved-searches/delete`,
    { saved_search_id: String(coats.id), env: 'sandbox' },
  );
  t.equal(res.statusCode, 404);
  t.equal((await api(app, 'GET', `/api/v1/saved_searches/${coats.id}`, sandboxKey)).status, 200);
});
