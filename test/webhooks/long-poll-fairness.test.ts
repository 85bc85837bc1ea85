/**
 * Long-poll places are shared fairly (OpenAPI listEvents "Long polling", docs/webhooks.md
 * "Polling instead of webhooks", issues #43 item 4 and #55 item 3), over real HTTP on the test
 * database:
 * - at most EVENTS_WAIT_MAX_PER_APP (default 20) waiting requests per app and environment, all
 *   its keys and tokens together: beyond, 429 `rate_limited` with Retry-After, before the
 *   process-wide 503; another app still gets its place;
 * - at most EVENTS_WAIT_MAX_PER_USER (default 5) for all of one user's tokens of an app, of
 *   several grants and refreshes; the app's tokens together at most 15 (20 - 5): its key and its
 *   other users still wait;
 * - at most EVENTS_WAIT_MAX_PER_OWNER (default 50) for all the apps of one developer account,
 *   their keys and their users' tokens: another developer still waits;
 * - an event wakes only the waiters who may see it (drizzle/0014's notification names the app,
 *   the environment and the seller): 1,000 waiters of other apps stay asleep (0 wake-ups, so 0
 *   reads) when one app's event, written through the API, arrives by the database's
 *   notification, and so does a token waiter of another seller of the same app; the app's key
 *   waiter and its seller's token waiter are answered.
 */
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { Browser } from '../helpers/browser.ts';
import { listeningApp } from '../helpers/listening.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  DEFAULT_WAIT_LIMITS,
  EventWaiters,
  type Waiter,
  type WaitScope,
} from '../../src/events/event-waiters.ts';
import type { EventsRepository } from '../../src/events/events-repository.ts';
import {
  createClient,
  createEndUser,
  exchange,
  obtainCode,
  tokenRequest,
  type EndUser,
} from '../oauth/support.ts';
import { api } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const { app, localUrl } = await listeningApp(t, {
  WEBHOOK_WORKER: 'false',
  // Room in the process for the 1,000 other apps' waiters and this file's own.
  EVENTS_WAIT_MAX: '1100',
});
const { waiters } = app.services.events;

const enc = encodeURIComponent;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The cursor for "now", as a poller starts (`wait=0` without a cursor). */
async function now(credential: string): Promise<string> {
  const res = await api(app, 'GET', '/api/v1/events?wait=0', credential);
  if (res.status !== 200) throw new Error(`cursor: ${res.status}`);
  return res.body.meta.next_cursor;
}

interface Answer {
  status: number;
  headers: Headers;
  body: Json;
}

/** A wait over HTTP; resolves once the server holds it (or answered it), with the answer. */
async function wait(credential: string, cursor: string, signal?: AbortSignal) {
  const before = waiters.size;
  let answered = false;
  const answer: Promise<Answer> = fetch(`${localUrl}/api/v1/events?wait=30&cursor=${enc(cursor)}`, {
    headers: { authorization: `Bearer ${credential}` },
    signal: signal ?? AbortSignal.timeout(45_000),
  }).then(async (res) => {
    answered = true;
    return { status: res.status, headers: res.headers, body: await res.json() };
  });
  answer.catch(() => {});
  await waitUntil('the request to wait or be answered', () => answered || waiters.size > before);
  return { answer, answered: () => answered };
}

/**
 * An approved app with an OAuth client, a live key, and tokens of end users from the consent flow
 * (tokens act in live, as the key).
 */
async function oauthApp() {
  const client = await createClient(app);
  await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
  await app.services.apps.approve(client.clientId);
  const key = (await app.services.keys.create({ appId: client.clientId, env: 'live' })).key;
  const owner = await app.services.users.getByUsername(client.ownerUsername);
  /** The user authorizes the app (once more: another grant): its tokens. */
  const tokensOf = async (user: EndUser) => {
    const code = await obtainCode(new Browser(app), client, user, {
      scope: 'read listings:write',
    });
    return (await exchange(app, client, code)).json() as Record<
      'access_token' | 'refresh_token',
      string
    >;
  };
  const token = async () => {
    const user = await createEndUser(app);
    return { user, token: (await tokensOf(user)).access_token };
  };
  return { appId: client.clientId, ownerId: owner.id, client, key, token, tokensOf };
}

/** Whether a place was taken in process, or the refusal's status. */
function outcome(set: EventWaiters, credential: string, scope: WaitScope): 'held' | number {
  try {
    set.enter(credential, scope);
    return 'held';
  } catch (err) {
    return (err as { statusCode: number }).statusCode;
  }
}

t.test('at most 20 waiting requests per app and environment: 429 beyond', async (t) => {
  t.equal(app.config.eventsWaitMaxPerApp, 20, 'the documented default');
  const crowded = await oauthApp();
  const keys = [crowded.key];
  for (let i = 0; i < 4; i += 1)
    keys.push((await app.services.keys.create({ appId: crowded.appId, env: 'live' })).key);
  const { token } = await crowded.token();
  const cursor = await now(crowded.key);
  // Four of its keys hold five places each (EVENTS_WAIT_MAX_PER_CREDENTIAL): the app's 20.
  const held = [];
  for (const key of keys.slice(0, 4))
    for (let i = 0; i < 5; i += 1) held.push(await wait(key, cursor));
  t.equal(waiters.size, 20, 'the app holds 20 places');
  t.notOk(
    held.some((w) => w.answered()),
    'all 20 wait',
  );

  const refused = await (await wait(keys[4]!, cursor)).answer;
  t.equal(refused.status, 429, "a fifth key's wait: the app's 21st");
  t.equal(refused.headers.get('retry-after'), '5', 'with Retry-After');
  t.match(refused.body, {
    error: {
      code: 'rate_limited',
      message: /This app already has 20 requests waiting for events in this environment/,
    },
    meta: {
      version: 'v1',
      environment: 'live',
      request_id: refused.headers.get('x-request-id'),
    },
  });
  const tokenRefused = await (await wait(token, cursor)).answer;
  t.equal(tokenRefused.status, 429, "an OAuth token of the app takes from the app's places too");
  t.equal(waiters.size, 20, 'the refused waits took no place');

  // Another app still gets its place (the process's 1,100 are far from full), and the same app in
  // the other environment has 20 of its own.
  const sandboxKey = (await app.services.keys.create({ appId: crowded.appId, env: 'sandbox' })).key;
  const sandboxWait = await wait(sandboxKey, await now(sandboxKey));
  t.equal(waiters.size, 21, "the app's sandbox wait is held");
  const other = await createDeveloper(app);
  const otherKey = await createKey(app, other, 'live');
  const otherWait = await wait(otherKey, await now(otherKey));
  t.equal(waiters.size, 22, "another app's wait is held");
  const created = await api(app, 'POST', '/api/v1/listings', otherKey, listingBody());
  const answer = await otherWait.answer;
  t.equal(answer.status, 200);
  t.strictSame(
    answer.body.data.map((e: Json) => e.data.listing.id),
    [created.body.data.id],
    'and is answered with its event',
  );
  t.notOk(
    held.some((w) => w.answered()),
    "the crowded app's waits were not woken by it",
  );

  t.notOk(sandboxWait.answered(), "nor the app's sandbox wait");

  // The app's own event answers its 20 waits (and its sandbox one, its own): places come back.
  const own = await api(app, 'POST', '/api/v1/listings', keys[0]!, listingBody());
  t.equal(own.status, 201);
  const answers = await Promise.all(held.map((w) => w.answer));
  t.ok(
    answers.every((a) => a.status === 200 && a.body.data.length === 1),
    'the 20 waits are answered with the event',
  );
  await api(app, 'POST', '/api/v1/listings', sandboxKey, listingBody());
  t.equal((await sandboxWait.answer).status, 200);
  await waitUntil('the places to be given back', () => waiters.size === 0 || undefined);
  const again = await api(app, 'GET', `/api/v1/events?wait=1&cursor=${enc(cursor)}`, keys[4]!);
  t.equal(again.status, 200, 'once they end, the app waits again');
});

t.test("one user's tokens share 5 of the app's places, its keys keep 5 of their own", async (t) => {
  t.equal(app.config.eventsWaitMaxPerUser, 5, 'the documented default');
  const shop = await oauthApp();
  const user = await createEndUser(app);
  const first = await shop.tokensOf(user);
  const second = await shop.tokensOf(user);
  // A refresh: the old access token keeps working until it expires (docs/oauth.md).
  const refresh = await tokenRequest(app, {
    grant_type: 'refresh_token',
    refresh_token: first.refresh_token,
    client_id: shop.client.clientId,
    client_secret: shop.client.clientSecret,
  });
  t.equal(refresh.statusCode, 200);
  const refreshed = refresh.json().access_token as string;
  const cursor = await now(shop.key);
  const stop = new AbortController();
  const held = [];
  for (let i = 0; i < 3; i += 1) held.push(await wait(first.access_token, cursor, stop.signal));
  for (let i = 0; i < 2; i += 1) held.push(await wait(second.access_token, cursor, stop.signal));
  t.equal(waiters.size, 5, "the user's tokens of two grants hold 5 places");
  for (const [token, which] of [
    [second.access_token, 'its token of another grant (2 waits of its own)'],
    [refreshed, 'the token its refresh issued'],
  ] as const) {
    const refused = await (await wait(token, cursor, stop.signal)).answer;
    t.equal(refused.status, 429, `a sixth wait of the user, by ${which}: 429`);
    t.equal(refused.headers.get('retry-after'), '5', 'with Retry-After');
    t.match(refused.body.error, {
      code: 'rate_limited',
      message: /^This user already has 5 requests waiting for this app's events \(at most 5/,
    });
  }
  t.equal(waiters.size, 5, 'the refused waits took no place');

  // The app's key and its other users still wait; its users together take at most 15 places.
  held.push(await wait(shop.key, cursor, stop.signal));
  t.equal(waiters.size, 6, "the app's key waits");
  for (let u = 0; u < 2; u += 1) {
    const other = await shop.token();
    for (let i = 0; i < 5; i += 1) held.push(await wait(other.token, cursor, stop.signal));
  }
  t.equal(waiters.size, 16, 'two other users wait, 5 each: the users hold 15 places');
  const fourth = await shop.token();
  const refused = await (await wait(fourth.token, cursor, stop.signal)).answer;
  t.equal(refused.status, 429, "a fourth user's wait: 429, the users' 15 are taken");
  t.match(refused.body.error.message, /^This app's OAuth tokens already have 15 requests/);
  for (let i = 0; i < 4; i += 1) held.push(await wait(shop.key, cursor, stop.signal));
  t.equal(waiters.size, 20, "the app's key still takes the app's last 5 places");
  t.notOk(
    held.some((w) => w.answered()),
    'all 20 wait',
  );
  stop.abort();
  await waitUntil('the places to be given back', () => waiters.size === 0 || undefined);
});

t.test("one developer's apps share 50 places: another developer still waits", async (t) => {
  t.equal(app.config.eventsWaitMaxPerOwner, 50, 'the documented default');
  const shop = await oauthApp();
  const appIds = [shop.appId];
  for (let i = 0; i < 2; i += 1) {
    const name = `Another shop ${randomUUID().slice(0, 8)}`;
    const created = await app.services.apps.create({
      ownerUsername: shop.client.ownerUsername,
      name,
    });
    appIds.push(created.id);
  }
  // 4 + 4 + 3 sandbox keys of its three apps: 5 waits each fill the apps' 20, 20 and 10.
  const keys: string[] = [];
  for (const [i, count] of [4, 4, 3].entries())
    for (let k = 0; k < count; k += 1)
      keys.push((await app.services.keys.create({ appId: appIds[i]!, env: 'sandbox' })).key);
  const cursor = await now(keys[0]!);
  const stop = new AbortController();
  const held = [];
  for (const key of keys.slice(0, 10))
    for (let i = 0; i < 5; i += 1) held.push(await wait(key, cursor, stop.signal));
  t.equal(waiters.size, 50, "the developer's three apps hold 50 places");
  const refused = await (await wait(keys[10]!, cursor, stop.signal)).answer;
  t.equal(refused.status, 429, "its third app's next key: 429, though that app holds only 10");
  t.equal(refused.headers.get('retry-after'), '5', 'with Retry-After');
  t.match(refused.body.error, {
    code: 'rate_limited',
    message: /^The apps of this app's developer account already have 50 requests waiting/,
  });
  const user = await shop.token();
  const tokenRefused = await (await wait(user.token, await now(user.token), stop.signal)).answer;
  t.equal(tokenRefused.status, 429, "its users' tokens take from the developer's places too");
  t.match(tokenRefused.body.error.message, /^The apps of this app's developer account/);
  t.equal(waiters.size, 50, 'the refused waits took no place');

  const other = await createDeveloper(app);
  const otherKey = await createKey(app, other, 'sandbox');
  held.push(await wait(otherKey, await now(otherKey), stop.signal));
  t.equal(waiters.size, 51, "another developer's wait is held");
  t.notOk(
    held.some((w) => w.answered()),
    'all 51 wait',
  );
  stop.abort();
  await waitUntil('the places to be given back', () => waiters.size === 0 || undefined);
});

t.test("issue 55's findings, in process with the default limits", async (t) => {
  const set = new EventWaiters(DEFAULT_WAIT_LIMITS);
  const scope = { appId: randomUUID(), environment: 'live', ownerId: randomUUID() };
  const user = randomUUID();
  const outcomes = [];
  for (let token = 0; token < 4; token += 1)
    for (let i = 0; i < 5; i += 1)
      outcomes.push(outcome(set, `token-${token}`, { ...scope, sellerId: user }));
  t.strictSame(
    outcomes,
    [...Array(5).fill('held'), ...Array(15).fill(429)],
    "one user's four tokens hold 5 of the app's places, not 20: 429 beyond",
  );
  t.equal(outcome(set, 'key', scope), 'held', "the app's key waits");
  t.equal(outcome(set, 'other', { ...scope, sellerId: randomUUID() }), 'held', 'another user too');

  const shared = new EventWaiters(DEFAULT_WAIT_LIMITS);
  const developer = randomUUID();
  const counts = { held: 0, 429: 0, 503: 0 } as Record<string | number, number>;
  for (let a = 0; a < 50; a += 1) {
    const appId = randomUUID();
    for (let k = 0; k < 4; k += 1)
      for (let i = 0; i < 5; i += 1) {
        const result = outcome(shared, `key-${a}-${k}`, {
          appId,
          environment: 'live',
          ownerId: developer,
        });
        counts[result] = (counts[result] ?? 0) + 1;
      }
  }
  t.strictSame(
    counts,
    { held: 50, 429: 950, 503: 0 },
    "one developer's 50 apps x 4 keys hold 50 of the process's 1,000 places: 429 beyond",
  );
  const otherScope = { appId: randomUUID(), environment: 'live', ownerId: randomUUID() };
  t.equal(outcome(shared, 'other-key', otherScope), 'held', "another developer's wait is held");
});

t.test('an event wakes only the waiters who may see it', async (t) => {
  const tenant = await oauthApp();
  const buyer = await tenant.token();
  const keyCursor = await now(tenant.key);
  const buyerCursor = await now(buyer.token);

  // 1,000 waiters of 50 other apps, 20 each (each app at its cap), asleep as a waiting request is.
  const others: Waiter[] = [];
  const naps: Promise<void>[] = [];
  let refusals = 0;
  for (let a = 0; a < 50; a += 1) {
    const appId = randomUUID();
    const ownerId = randomUUID();
    for (let i = 0; i < 20; i += 1) {
      const waiter = waiters.enter(`other-${a}-${i}`, {
        appId,
        environment: 'live',
        ownerId,
        ...(i % 2 === 0 ? {} : { sellerId: randomUUID() }),
      });
      others.push(waiter);
      naps.push(waiter.sleep(60_000));
    }
    try {
      waiters.enter(`other-${a}-extra`, { appId, environment: 'live', ownerId }).leave();
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 429) refusals += 1;
    }
  }
  t.equal(refusals, 50, 'each of the 50 apps is at its cap: a 21st is refused (429)');
  t.teardown(() => {
    for (const waiter of others) waiter.leave();
  });
  // The same app's token waiter of another seller (in memory) and of the key's seller.
  const otherSeller = waiters.enter('same-app-other-seller', {
    appId: tenant.appId,
    environment: 'live',
    sellerId: randomUUID(),
    ownerId: tenant.ownerId,
  });
  const sameSeller = waiters.enter('same-app-same-seller', {
    appId: tenant.appId,
    environment: 'live',
    sellerId: tenant.ownerId,
    ownerId: tenant.ownerId,
  });
  t.teardown(() => {
    otherSeller.leave();
    sameSeller.leave();
  });
  // Real long polls: the app's key, and a token of the app whose user is not the key's seller.
  const keyWait = await wait(tenant.key, keyCursor);
  const buyerWait = await wait(buyer.token, buyerCursor);

  // What a woken waiter reads: counted at the repository (a woken wait reads its page again).
  const repository = (app.services.events as unknown as { events: EventsRepository }).events;
  let reads = 0;
  const pageAfter = repository.pageAfter.bind(repository);
  repository.pageAfter = (...args) => {
    reads += 1;
    return pageAfter(...args);
  };
  t.teardown(() => {
    repository.pageAfter = pageAfter;
  });
  const wakesBefore = waiters.wakes;

  // One event of the app, through the API with its key (seller: the app's owner).
  const created = await api(app, 'POST', '/api/v1/listings', tenant.key, listingBody());
  t.equal(created.status, 201);
  const answer = await keyWait.answer;
  t.equal(answer.status, 200, "the app's key waiter is answered");
  t.strictSame(
    answer.body.data.map((e: Json) => e.data.listing.id),
    [created.body.data.id],
  );
  t.ok(sameSeller.notified, "the app's token waiter of that seller is woken");
  t.equal(others.filter((w) => w.notified).length, 0, '1,000 waiters of other apps sleep on');
  t.notOk(otherSeller.notified, 'a token waiter of another seller of the app sleeps on');
  t.notOk(buyerWait.answered(), "the buyer's token wait goes on (a real request)");
  t.equal(waiters.wakes - wakesBefore, 2, "two wake-ups: the key waiter and that seller's");
  t.ok(reads <= 2, `${reads} page read(s), only by the key waiter (not one per waiter)`);

  // The buyer's own listing wakes the buyer's wait, and the key's, not the owner's token.
  sameSeller.notified = false;
  const own = await api(app, 'POST', '/api/v1/listings', buyer.token, listingBody());
  t.equal(own.status, 201);
  const buyerAnswer = await buyerWait.answer;
  t.equal(buyerAnswer.status, 200, "the buyer's wait is answered by the buyer's event");
  t.strictSame(
    buyerAnswer.body.data.map((e: Json) => e.data.listing.id),
    [own.body.data.id],
  );
  t.notOk(sameSeller.notified, "the owner's token waiter is not woken by the buyer's event");
  t.equal(others.filter((w) => w.notified).length, 0, 'nor is any other app');
  for (const waiter of others) waiter.leave();
  await Promise.all(naps);
});

t.test('what each notification wakes', async (t) => {
  const set = new EventWaiters(DEFAULT_WAIT_LIMITS);
  const appId = randomUUID();
  const ownerId = randomUUID();
  const seller = randomUUID();
  const key = set.enter('k', { appId, environment: 'live', ownerId });
  const mine = set.enter('t1', { appId, environment: 'live', sellerId: seller, ownerId });
  const theirs = set.enter('t2', { appId, environment: 'live', sellerId: randomUUID(), ownerId });
  const sandbox = set.enter('k2', { appId, environment: 'sandbox', ownerId });
  const flags = () => [key, mine, theirs, sandbox].map((w) => w.notified);
  const reset = () => [key, mine, theirs, sandbox].forEach((w) => (w.notified = false));

  set.notify(`${appId}:live:${seller}`);
  t.strictSame(flags(), [true, true, false, false], "an event of a seller: keys and the seller's");
  reset();
  set.notify(`${appId}:live:`);
  t.strictSame(flags(), [true, false, false, false], 'a ping (no seller): keys only');
  reset();
  set.notify(`${appId}:live`);
  t.strictSame(flags(), [true, true, true, false], "drizzle/0012's payload: the app's all");
  reset();
  set.notify(`${randomUUID()}:live:${seller}`);
  t.strictSame(flags(), [false, false, false, false], 'another app: none');
  t.equal(set.wakes, 6);
  for (const w of [key, mine, theirs, sandbox]) w.leave();
  t.equal(set.size, 0);
});
