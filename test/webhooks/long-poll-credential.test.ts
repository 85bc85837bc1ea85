/**
 * A waiting long poll re-checks its credential (OpenAPI listEvents "Long polling",
 * docs/webhooks.md "Polling instead of webhooks"): a key revoked, or an OAuth token whose
 * user removed the app, while its GET /api/v1/events?wait= waits gets 401 when the next event
 * arrives, never that event. A credential still valid gets the event (the control).
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { listeningApp } from '../helpers/listening.ts';
import { api } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

// Over a real socket: a waiting request is answered as a client sees it.
const { app, localUrl } = await listeningApp(t, { WEBHOOK_WORKER: 'false' });

/** The cursor for "now", as a poller starts (`wait=0` without a cursor). */
async function now(credential: string): Promise<string> {
  const res = await api(app, 'GET', '/api/v1/events?wait=0', credential);
  if (res.status !== 200) throw new Error(`cursor: ${res.status}`);
  return res.body.meta.next_cursor;
}

/** Starts a wait; resolves once the server holds it, with the answer to come. */
async function waiting(credential: string, cursor: string) {
  const before = app.services.events.waiters.size;
  const answer = fetch(`${localUrl}/api/v1/events?wait=20&cursor=${encodeURIComponent(cursor)}`, {
    headers: { authorization: `Bearer ${credential}` },
    signal: AbortSignal.timeout(45_000),
  }).then(async (res) => ({ status: res.status, body: await res.json() }));
  await waitUntil('the request to wait', () => app.services.events.waiters.size > before);
  return { answer };
}

t.test('a key revoked while it waits gets 401, not the next event', async (t) => {
  const dev = await createDeveloper(app);
  const doomed = await app.services.keys.create({ appId: dev.appId, env: 'sandbox' });
  const kept = await createKey(app, dev, 'sandbox');
  const cursor = await now(doomed.key);

  const revokedWait = await waiting(doomed.key, cursor);
  const keptWait = await waiting(kept, cursor);
  await app.services.keys.revoke(doomed.id);
  const created = await api(app, 'POST', '/api/v1/listings', kept, listingBody());
  t.equal(created.status, 201, "an event of the key's app is recorded after the revocation");

  const refused = await revokedWait.answer;
  t.equal(refused.status, 401, 'the revoked key is answered 401');
  t.equal(refused.body.error.code, 'unauthorized');
  t.notOk(JSON.stringify(refused.body).includes(created.body.data.id), 'without the event');
  const answered = await keptWait.answer;
  t.equal(answered.status, 200, 'a key still valid gets it');
  t.strictSame(
    answered.body.data.map((e: { data: { listing: { id: string } } }) => e.data.listing.id),
    [created.body.data.id],
  );
});

t.test('an OAuth token whose user removed the app while it waits gets 401', async (t) => {
  const client = await createClient(app);
  await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
  const user = await createEndUser(app);
  const browser = new Browser(app);
  const token = async () =>
    (
      await exchange(
        app,
        client,
        await obtainCode(browser, client, user, { scope: 'read listings:write' }),
      )
    ).json().access_token as string;
  const first = await token();
  const listing = await api(app, 'POST', '/api/v1/listings', first, listingBody());
  t.equal(listing.status, 201);
  const cursor = await now(first);

  const wait = await waiting(first, cursor);
  await app.services.oauth.revokeApp(user.id, client.clientId);
  // The user authorizes the app again: a new token edits the listing, an event the old token's
  // wait would see (same app, same user).
  const second = await token();
  const edited = await api(app, 'PATCH', `/api/v1/listings/${listing.body.data.id}`, second, {
    title: 'Edited after the removal',
  });
  t.equal(edited.status, 200);
  const refused = await wait.answer;
  t.equal(refused.status, 401, 'the removed token is answered 401');
  t.notOk(JSON.stringify(refused.body).includes('Edited after the removal'), 'without the event');
});
