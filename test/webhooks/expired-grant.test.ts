/**
 * An expired grant ends the data flow as a revoked one does (docs/oauth.md "Consent",
 * docs/webhooks.md "When a user removes an app"): once every token of a user's grant to app A
 * is past its expiry, /account/apps stops listing A and A hears nothing more about the user's
 * listings (no event recorded, so no webhook and nothing in its GET /api/v1/events), whichever
 * app makes the change. The apps that hear about a user are exactly the apps the user sees.
 * Tokens come from the real consent flow; expiry is set in the database.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { Browser } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  type Client,
} from '../oauth/support.ts';
import { api, webhooksApp, type Json } from './support.ts';

const app = await webhooksApp(t);

const appA = await createClient(app);
const appB = await createClient(app, 'https://other.example.com/cb');
for (const client of [appA, appB])
  await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
const keyA = (await app.services.keys.create({ appId: appA.clientId, env: 'live' })).key;

const person = await createEndUser(app);
const web = new Browser(app);

async function authorize(client: Client): Promise<string> {
  const code = await obtainCode(web, client, person, { scope: 'read listings:write' });
  return (await exchange(app, client, code)).json().access_token;
}

/** The apps /account/apps shows the signed-in user, by name. */
async function listedApps(): Promise<string[]> {
  const page = await web.get('/account/apps');
  t.equal(page.statusCode, 200);
  return [...page.body.matchAll(/<h2>([^<]+)<\/h2>/g)].map((m) => m[1]!);
}

/** The event types recorded for app A about one listing, oldest first. */
async function recordedForA(listingId: string): Promise<string[]> {
  const rows = await queryRows<{ type: string }>(
    app.db,
    sql`select type from webhook_events where app_id = ${appA.clientId}
          and listing_id = ${listingId} order by created_at`,
  );
  return rows.map((r) => r.type);
}

/** What app A's GET /api/v1/events lists about one listing, oldest first. */
async function listedToA(listingId: string): Promise<string[]> {
  const res = await api(app, 'GET', '/api/v1/events?limit=100', keyA);
  t.equal(res.status, 200);
  return res.body.data
    .filter((e: Json) => e.data.listing?.id === listingId)
    .map((e: Json) => e.type)
    .reverse();
}

/** Every token of the person's grants to A expires, as 90 days without a refresh would. */
async function expireGrantOfA(): Promise<void> {
  await app.db.execute(
    sql`update oauth_tokens set expires_at = now() - interval '1 second'
        where grant_id in (select id from oauth_grants
          where app_id = ${appA.clientId} and user_id = ${person.id})`,
  );
}

t.test('a grant whose tokens all expired leaves the page and stops the flow', async (t) => {
  const tokenA = await authorize(appA);
  const tokenB = await authorize(appB);
  const created = await api(app, 'POST', '/api/v1/listings', tokenA, listingBody());
  t.equal(created.status, 201, "a listing created through app A's token");
  const id = created.body.data.id as string;

  t.strictSame(await listedApps(), [appA.name, appB.name], 'both apps are listed');
  const edited = await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB, { title: 'Granted' });
  t.equal(edited.status, 200, 'the user edits it through app B');
  t.strictSame(
    await recordedForA(id),
    ['listing.created', 'listing.updated'],
    'while the grant is in use, A hears of the edit made through B',
  );

  await expireGrantOfA();
  t.strictSame(await listedApps(), [appB.name], '/account/apps no longer lists A');
  t.equal((await api(app, 'GET', '/api/v1/me', tokenA)).status, 401, "A's token answers 401");

  const later = await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB, {
    title: 'After the expiry',
  });
  t.equal(later.status, 200, 'the user edits it through B again');
  const archived = await api(app, 'DELETE', `/api/v1/listings/${id}`, tokenB);
  t.equal(archived.status, 200, 'and archives it');
  t.strictSame(
    await recordedForA(id),
    ['listing.created', 'listing.updated'],
    'no event is recorded for A after its grant expired',
  );
  t.strictSame(
    await listedToA(id),
    ['listing.created', 'listing.updated'],
    "A's /events keeps what it was sent, and nothing after",
  );

  // Control: A's developer's own listing still reaches A (the app itself is fine).
  const own = await api(app, 'POST', '/api/v1/listings', keyA, listingBody());
  t.strictSame(await recordedForA(own.body.data.id), ['listing.created']);

  // Authorizing again: listed again, and the flow resumes from then on.
  const again = await authorize(appA);
  t.strictSame(await listedApps(), [appB.name, appA.name], 'A is listed again');
  const fresh = await api(app, 'POST', '/api/v1/listings', again, listingBody());
  await api(app, 'PATCH', `/api/v1/listings/${fresh.body.data.id}`, tokenB, { title: 'Again' });
  t.strictSame(await recordedForA(fresh.body.data.id), ['listing.created', 'listing.updated']);
});

t.test('a refresh token still valid keeps the grant in use', async (t) => {
  // Only the access tokens expire: the app can still refresh, so it is listed and still hears.
  const tokenB = await authorize(appB);
  const tokenA = await authorize(appA);
  const created = await api(app, 'POST', '/api/v1/listings', tokenA, listingBody());
  const id = created.body.data.id as string;
  await app.db.execute(
    sql`update oauth_tokens set expires_at = now() - interval '1 second'
        where kind = 'access' and grant_id in (select id from oauth_grants
          where app_id = ${appA.clientId} and user_id = ${person.id})`,
  );
  t.ok((await listedApps()).includes(appA.name), 'A is still listed');
  await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB, { title: 'Refreshable' });
  t.strictSame(await recordedForA(id), ['listing.created', 'listing.updated'], 'A still hears');
});
