/**
 * Revoked access stops the data flow (docs/webhooks.md, "When a user removes an app"): once a
 * user's grant to an app is gone, the app hears nothing new about that user's listings: no event
 * recorded, so no webhook and nothing in its GET /api/v1/events, and a delivery still pending for
 * an earlier event is not sent. Listings the app's developer made with its API key are
 * unaffected; authorizing the app again resumes the flow. Through the real OAuth flow (consent
 * page, code, token) and a real HTTPS receiver.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { Browser, csrfOf } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  type Client,
} from '../oauth/support.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

// Retries after 3 s: time enough to revoke between a failed attempt and its retry.
const app = await webhooksApp(t, { WEBHOOK_RETRY_SCHEDULE: '3' });
const receiver = await startReceiver(t);

const appA = await createClient(app);
const appB = await createClient(app, 'https://other.example.com/cb');
// OAuth tokens act in the live environment: A's key and both endpoints are live.
for (const client of [appA, appB]) {
  await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
  await app.services.apps.approve(client.clientId);
}
const keyA = (await app.services.keys.create({ appId: appA.clientId, env: 'live' })).key;
await createEndpoint(app, receiver, { appId: appA.clientId, env: 'live', path: '/a' });
await createEndpoint(app, receiver, { appId: appB.clientId, env: 'live', path: '/b' });

const person = await createEndUser(app);
const web = new Browser(app);

async function authorize(client: Client): Promise<{ access_token: string; refresh_token: string }> {
  const code = await obtainCode(web, client, person, { scope: 'read listings:write' });
  return (await exchange(app, client, code)).json();
}

/** App A's events about one listing, as its API key lists them. */
async function eventsOfA(listingId: string): Promise<string[]> {
  const res = await api(app, 'GET', '/api/v1/events?limit=100', keyA);
  t.equal(res.status, 200);
  return res.body.data
    .filter((e: Json) => e.data.listing?.id === listingId)
    .map((e: Json) => e.type)
    .reverse();
}

/** What reached the receiver at /a about one listing, verified, in order. */
const heardByA = (listingId: string) =>
  receiver
    .to('/a')
    .filter((r) => (r.event?.data as Json)?.listing?.id === listingId)
    .map((r) => r.event!.type);

/** The deliveries of one listing's events of a type (one endpoint each). */
const deliveryOf = (listingId: string, type: string) =>
  queryRows<{
    id: string;
    status: string;
    attempts: number;
    last_response_code: number | null;
    last_error: string | null;
  }>(
    app.db,
    sql`select d.id, d.status, d.attempts, d.last_response_code, d.last_error
        from webhook_deliveries d join webhook_events e on e.id = d.event_id
        where e.listing_id = ${listingId} and e.type = ${type}`,
  );

async function removeAppA(): Promise<void> {
  const page = await web.get('/account/apps');
  const removed = await web.post('/account/apps/revoke', {
    app_id: appA.clientId,
    csrf_token: csrfOf(page.body),
  });
  t.equal(removed.statusCode, 303, 'the user removes app A under /account/apps');
}

t.test('removing an app stops its events, webhooks and pending deliveries', async (t) => {
  const tokenA = await authorize(appA);
  const tokenB = await authorize(appB);
  const draft = await api(app, 'POST', '/api/v1/listings', tokenA.access_token, listingBody());
  t.equal(draft.status, 201, "a draft created through app A's token");
  const id = draft.body.data.id as string;
  const own = await api(app, 'POST', '/api/v1/listings', keyA, listingBody());
  t.equal(own.status, 201, "and a listing of A's developer, made with A's API key");
  await waitUntil('both listing.created at /a', () => receiver.to('/a').length >= 2);
  t.strictSame(heardByA(id), ['listing.created']);

  // The user edits through B while A still holds access: A's endpoint fails that delivery
  // (503, retried in 3 s), and before the retry the user removes A.
  receiver.reply = ({ path, event }) =>
    path === '/a' && (event?.data as Json)?.listing?.title === 'Edited while granted'
      ? { status: 503 }
      : { status: 200 };
  const edited = await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB.access_token, {
    title: 'Edited while granted',
  });
  t.equal(edited.status, 200, "app B's token edits the draft (the user granted it)");
  const failed = await waitUntil('the first attempt, answered 503', async () => {
    const [row] = await deliveryOf(id, 'listing.updated');
    return row?.last_response_code === 503 ? row : null;
  });
  await removeAppA();
  t.equal(
    (await api(app, 'GET', '/api/v1/me', tokenA.access_token)).status,
    401,
    "A's token answers 401",
  );

  const after = await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB.access_token, {
    title: 'Edited after removal',
    description: 'Nothing of this reaches app A',
  });
  t.equal(after.status, 200, 'the user edits the draft through app B after removing A');
  const archived = await api(app, 'DELETE', `/api/v1/listings/${id}`, tokenB.access_token);
  t.equal(archived.status, 200, 'and archives it');
  const ownEdit = await api(app, 'PATCH', `/api/v1/listings/${own.body.data.id}`, keyA, {
    title: 'The developer keeps editing',
  });
  t.equal(ownEdit.status, 200);

  // The developer's own listing is the control: its update arrives, so A's endpoint works.
  await waitUntil("the update of the developer's listing at /a", () =>
    heardByA(own.body.data.id).includes('listing.updated'),
  );
  const delivery = await waitUntil('the pending delivery to be withdrawn', async () => {
    const [row] = await deliveryOf(id, 'listing.updated');
    return row?.status === 'failed' ? row : null;
  });
  t.equal(delivery.id, failed.id);
  t.equal(delivery.attempts, 1, 'no second attempt');
  t.match(delivery.last_error, /removed this app's access/, 'the retry is withdrawn, not sent');
  t.strictSame(
    receiver
      .to('/a')
      .filter((r) => (r.event?.data as Json)?.listing?.title === 'Edited while granted')
      .map((r) => r.status),
    [503],
    'the receiver saw the first attempt only',
  );
  t.strictSame(heardByA(id), ['listing.created', 'listing.updated'], 'nothing after removal');
  t.strictSame(
    await eventsOfA(id),
    ['listing.created', 'listing.updated'],
    "A's /events keeps what it was sent while granted, and nothing after",
  );
  t.notOk(
    receiver.received.some((r) => r.raw.toString().includes('Nothing of this reaches app A')),
    'the description written after removal reached no receiver',
  );
  t.equal(receiver.to('/b').length, 0, 'B hears nothing of listings it did not create');

  // Authorizing A again resumes the flow from then on (nothing in between is replayed).
  const again = await authorize(appA);
  const fresh = await api(app, 'POST', '/api/v1/listings', again.access_token, listingBody());
  await api(app, 'PATCH', `/api/v1/listings/${fresh.body.data.id}`, tokenB.access_token, {
    title: 'After re-authorizing',
  });
  await waitUntil('events after re-authorizing', () => heardByA(fresh.body.data.id).length === 2);
  t.strictSame(heardByA(fresh.body.data.id), ['listing.created', 'listing.updated']);
  t.strictSame(heardByA(id), ['listing.created', 'listing.updated'], 'the old draft stays quiet');
});

t.test('revoking the refresh token through /oauth/revoke ends the flow too', async (t) => {
  const tokens = await authorize(appA);
  const listing = await api(app, 'POST', '/api/v1/listings', tokens.access_token, listingBody());
  const id = listing.body.data.id as string;
  await waitUntil('listing.created at /a', () => heardByA(id).length === 1);
  // The user's other grants of A (from the first test) go too: only then is A's access gone.
  await removeAppA();
  const tokensAgain = await authorize(appA);
  const revoked = await app.inject({
    method: 'POST',
    url: '/oauth/revoke',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      token: tokensAgain.refresh_token,
      client_id: appA.clientId,
      client_secret: appA.clientSecret,
    }).toString(),
  });
  t.equal(revoked.statusCode, 200, 'app A revokes its refresh token (RFC 7009)');
  const tokenB = await authorize(appB);
  await api(app, 'PATCH', `/api/v1/listings/${id}`, tokenB.access_token, { title: 'Later' });
  const control = await api(app, 'POST', '/api/v1/listings', keyA, listingBody());
  await waitUntil('the control listing at /a', () =>
    heardByA(control.body.data.id).includes('listing.created'),
  );
  t.strictSame(await eventsOfA(id), ['listing.created'], 'no event after the revocation');
  t.strictSame(heardByA(id), ['listing.created'], 'no webhook after the revocation');
});

t.test("a deleted app hears nothing more, even of its developer's own listings", async (t) => {
  const doomed = await createClient(app);
  await app.services.apps.completeMilestone(doomed.clientId, 'sandbox_listing');
  const doomedKey = (await app.services.keys.create({ appId: doomed.clientId, env: 'sandbox' }))
    .key;
  const other = await app.services.apps.create({
    ownerUsername: doomed.ownerUsername,
    name: 'Another tool of the developer',
  });
  const otherKey = (await app.services.keys.create({ appId: other.id, env: 'sandbox' })).key;
  const own = await api(app, 'POST', '/api/v1/listings', doomedKey, listingBody());
  t.equal(own.status, 201);
  await app.services.apps.delete(doomed.clientId, doomed.name);
  const edited = await api(app, 'PATCH', `/api/v1/listings/${own.body.data.id}`, otherKey, {
    title: 'Edited after the app was deleted',
  });
  t.equal(edited.status, 200, "the developer edits it with another app's key");
  const [row] = await queryRows<{ n: number }>(
    app.db,
    sql`select count(*)::int as n from webhook_events
        where listing_id = ${own.body.data.id} and type = 'listing.updated'`,
  );
  t.equal(row!.n, 0, 'no event is recorded for the deleted app');
});
