/**
 * The Events pages (docs/portal.md) against a REAL HTTPS receiver: an event made by the app's
 * key is listed as GET /api/v1/events lists it, with its delivery per endpoint; its page shows
 * every attempt (time, answer, duration), the next retry while one is due, and Redeliver sends
 * it again (a new attempt reaches the receiver with the same delivery id). `admin event show`
 * gives the same deliveries and attempts. Another user's event is not found.
 */
import t from 'tap';
import { COMMANDS } from '../../src/cli/admin.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, startReceiver } from '../webhooks/support.ts';
import {
  alertOf,
  appWithLog,
  createApp,
  noticeOf,
  shownSecret,
  signUp,
  createKeyInPortal,
} from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

// The first retry 3 s after a failure: long enough to see it scheduled on the page.
const { app } = await appWithLog(t, {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_RETRY_SCHEDULE: '3,1',
});
const receiver = await startReceiver(t);
let failFirst = true;
receiver.reply = ({ path }) => {
  if (path === '/flaky' && failFirst) {
    failFirst = false;
    return { status: 500 };
  }
  return { status: 200 };
};

const owner = await signUp(app);
const appId = await createApp(owner, 'Events app');
const key = await createKeyInPortal(owner, appId, { name: 'Events' });
const hooksUrl = `/portal/apps/${appId}/webhooks`;
const created = await owner.browser.act(hooksUrl, hooksUrl, {
  env: 'sandbox',
  url: receiver.url('/flaky'),
});
receiver.secrets.set('/flaky', shownSecret(created.body, 'webhook-secret')!);

const listing = await api(app, 'POST', '/api/v1/listings', key, listingBody({ title: 'Evented' }));
const listed = await api(app, 'GET', '/api/v1/events?limit=5', key);
const eventId = listed.body.data[0].id as string;
const eventUrl = `/portal/apps/${appId}/events/${eventId}`;

t.test('the list is GET /api/v1/events, with each delivery', async (t) => {
  const page = await owner.browser.get(`/portal/apps/${appId}/events?env=sandbox`);
  t.equal(page.statusCode, 200);
  t.match(page.body, new RegExp(`href="${eventUrl}"`), 'the event links to its page');
  t.match(page.body, /listing\.created/);
  t.match(page.body, new RegExp(listing.body.data.id), 'with its listing');
  const ids = [...page.body.matchAll(/\/events\/([0-9a-f]{32})"/g)].map((m) => m[1]);
  t.same(
    [...new Set(ids)],
    listed.body.data.map((e: { id: string }) => e.id),
    'the same events, in the same order',
  );
  t.match(page.body, /flaky<\/li>/, 'the delivery to the endpoint');
  const live = await owner.browser.get(`/portal/apps/${appId}/events?env=live`);
  t.match(live.body, /No live events yet/);
  const bad = await owner.browser.get(`/portal/apps/${appId}/events?cursor=yesterday`);
  t.equal(bad.statusCode, 400);
  t.equal(alertOf(bad.body), 'That page link is broken; start again from the newest events.');
});

t.test("an event's page: attempts, the next retry, then redeliver", async (t) => {
  // The first attempt fails (500); its retry is due 3 s later.
  const pending = await waitUntil('the first attempt', async () => {
    const page = await owner.browser.get(eventUrl);
    return /<td class="num">1<\/td>/.test(page.body) ? page.body : undefined;
  });
  t.match(pending, /<span class="delivery-pending">pending<\/span>/);
  t.match(pending, /<dt>Next retry<\/dt><dd><time datetime="/, 'the next retry time');
  t.match(
    pending,
    /<td>500(?: <span class="muted">[^<]*<\/span>)?<\/td>\s*<td class="num">\d+ ms<\/td>/,
    'attempt 1: 500, its duration',
  );
  t.notMatch(pending, /Redeliver to/, 'no redeliver while pending');

  const done = await waitUntil(
    'the retry to succeed',
    async () => {
      const page = await owner.browser.get(eventUrl);
      return /delivery-succeeded/.test(page.body) ? page.body : undefined;
    },
    { timeoutMs: 20_000 },
  );
  t.match(done, /<td>200<\/td>\s*<td class="num">\d+ ms<\/td>/, 'attempt 2: 200');
  t.match(done, /<dt>Next retry<\/dt><dd><span class="muted">none<\/span>/);

  const before = receiver.to('/flaky').length;
  const redelivered = await owner.browser.act(eventUrl, `${eventUrl}/redeliver`, {
    delivery_id: /name="delivery_id" value="([0-9a-f]{32})"/.exec(done)![1]!,
  });
  t.equal(redelivered.statusCode, 303);
  const page = await owner.browser.get(String(redelivered.headers.location));
  t.equal(noticeOf(page.body), 'The delivery was scheduled again, with the same delivery id.');
  const again = await waitUntil('the redelivery', () => receiver.to('/flaky')[before]);
  t.equal(again.verifyError, null);
  t.equal(again.event?.event_id, eventId, 'the same event');

  const shown = (await COMMANDS['event show']!.run(app.services, new Map([['id', [eventId]]]))) as {
    event: { id: string };
    deliveries: { id: string; attempts_made: { response_code: number | null }[] }[];
  };
  t.equal(shown.event.id, eventId);
  t.equal(shown.deliveries.length, 1);
  const codes = await waitUntil('the redelivery recorded', async () => {
    const d = (await app.services.events.detail(eventId)).deliveries[0]!;
    return d.attempts_made.length === 3 ? d.attempts_made.map((a) => a.response_code) : undefined;
  });
  t.same(codes, [500, 200, 200], 'every attempt is kept, the redelivery too');
});

t.test("another user's event is not found", async (t) => {
  const stranger = await signUp(app);
  const strangerApp = await createApp(stranger);
  const page = await stranger.browser.get(`/portal/apps/${strangerApp}/events/${eventId}`);
  t.equal(page.statusCode, 404);
  await t.rejects(app.services.events.detail(eventId, { appId: strangerApp }), {
    message: `No event with id ${eventId}.`,
  });
});
