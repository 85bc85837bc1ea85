/**
 * Saved searches and the users behind OAuth tokens (OpenAPI "Saved searches"): a search saved
 * through a user's token is listed, read and deleted only through that user's tokens (and the
 * app's keys); its listing.matched events are seen by the app's keys and that user's tokens,
 * no one else's; the consent page says what `searches` allows; and once the user removes the
 * app, the search matches nothing more, until they authorize it again. Through the real OAuth
 * flow (consent page, code, token) and the matcher of a running server.
 */
import t from 'tap';
import { Browser, csrfOf } from '../helpers/browser.ts';
import { waitUntil } from '../helpers/wait.ts';
import {
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  type EndUser,
} from '../oauth/support.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';
import { drained, publish, save, searcher } from './support.ts';

const app = await webhooksApp(t);
const client = await createClient(app);
await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
await app.services.apps.approve(client.clientId);
const key = (
  await app.services.keys.create({ appId: client.clientId, env: 'live', scopes: 'read searches' })
).key;
const seller = await searcher(app);
const [ursula, victor] = [await createEndUser(app), await createEndUser(app)];

async function tokenOf(user: EndUser, web = new Browser(app)): Promise<string> {
  const code = await obtainCode(web, client, user, { scope: 'read searches' });
  return (await exchange(app, client, code)).json().access_token;
}

const matchedEvents = async (credential: string): Promise<Json[]> =>
  (await api(app, 'GET', '/api/v1/events?type=listing.matched&limit=100', credential)).body.data;

t.test('the consent page says what searches allows', async (t) => {
  const web = new Browser(app);
  const page = await web.signIn(
    `/oauth/authorize?response_type=code&client_id=${client.clientId}&redirect_uri=${encodeURIComponent(client.redirectUri)}&scope=read+searches&state=s`,
    ursula,
  );
  t.equal(page.statusCode, 200);
  t.match(page.body, /Save searches of the marketplace in your name/);
});

t.test("a token's searches are its user's; their events too", async (t) => {
  const ursulas = await tokenOf(ursula);
  const victors = await tokenOf(victor);
  const search = await save(app, ursulas, { brand: 'Filson' });
  const listed = async (credential: string) =>
    (await api(app, 'GET', '/api/v1/saved_searches', credential)).body.data.map((s: Json) => s.id);
  t.strictSame(await listed(ursulas), [search.id], "through Ursula's token");
  t.strictSame(await listed(key), [search.id], "and the app's key");
  t.strictSame(await listed(victors), [], "not through Victor's");
  t.equal((await api(app, 'GET', `/api/v1/saved_searches/${search.id}`, victors)).status, 404);
  t.equal((await api(app, 'DELETE', `/api/v1/saved_searches/${search.id}`, victors)).status, 404);

  const { id } = await publish(app, seller.live, {
    title: 'Filson tin cloth jacket',
    brand: 'Filson',
  });
  const about = (events: Json[]) => events.filter((e) => e.data.listing.id === id);
  await waitUntil('the match in /events', async () => about(await matchedEvents(key)).length === 1);
  t.equal(about(await matchedEvents(ursulas)).length, 1, "Ursula's token sees it");
  t.equal(about(await matchedEvents(victors)).length, 0, "Victor's token does not");
  t.equal((await matchedEvents(victors)).length, 0, 'nothing of it at all');
});

t.test('removing the app stops the searches saved through the user’s tokens', async (t) => {
  const web = new Browser(app);
  const ursulas = await tokenOf(ursula, web);
  await save(app, ursulas, { brand: 'Belstaff' });
  const page = await web.get('/account/apps');
  const removed = await web.post('/account/apps/revoke', {
    app_id: client.clientId,
    csrf_token: csrfOf(page.body),
  });
  t.equal(removed.statusCode, 303, 'Ursula removes the app');
  const listing = await publish(app, seller.live, {
    title: 'Belstaff Trialmaster',
    brand: 'Belstaff',
  });
  await drained(app);
  const events = await matchedEvents(key);
  t.equal(
    events.filter((e) => e.data.listing.id === listing.id).length,
    0,
    'no listing.matched for a search of a user who removed the app',
  );
});

t.test('a search needs a grant that carries searches, not any grant of its user', async (t) => {
  const ida = await createEndUser(app);
  const withSearches = await exchange(
    app,
    client,
    await obtainCode(new Browser(app), client, ida, { scope: 'read searches' }),
  );
  await save(app, withSearches.json().access_token, { brand: 'Grenfell' });
  // A second authorization of the same app, for `read` only, and the first one's end.
  await exchange(app, client, await obtainCode(new Browser(app), client, ida, { scope: 'read' }));
  const revoked = await app.inject({
    method: 'POST',
    url: '/oauth/revoke',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      token: withSearches.json().refresh_token,
      client_id: client.clientId,
      client_secret: client.clientSecret,
    }).toString(),
  });
  t.equal(revoked.statusCode, 200, 'the grant that carried searches is revoked');
  const listing = await publish(app, seller.live, { title: 'Grenfell coat', brand: 'Grenfell' });
  await drained(app);
  t.equal(
    (await matchedEvents(key)).filter((e) => e.data.listing.id === listing.id).length,
    0,
    'a read-only grant left does not keep the search matching',
  );
});

t.test("a match of a user's own listing shows the app's keys the public view", async (t) => {
  const wanda = await createEndUser(app);
  const code = await obtainCode(new Browser(app), client, wanda, {
    scope: 'read searches listings:write',
  });
  const wandas = (await exchange(app, client, code)).json().access_token;
  await save(app, wandas, { brand: 'Musto' });
  const listing = await publish(app, wandas, { title: 'Musto smock', brand: 'Musto' });
  await drained(app);
  const [event] = (await matchedEvents(key)).filter((e) => e.data.listing.id === listing.id);
  t.ok(event, "the app's key lists the match");
  t.notOk('external_id' in event!.data.listing, 'without the owner fields its GET would not show');
  const asKey = await api(app, 'GET', `/api/v1/listings/${listing.id}`, key);
  t.notOk('external_id' in asKey.body.data, 'as GET /listings/{id} shows the key');
});
