/**
 * listing.matched without a webhook endpoint (issue #46: "receive listing.matched by webhook and
 * by long poll"), on a listening server with its matcher, through the SDK: a long poll of GET
 * /events?type=listing.matched waiting from a cursor is answered with the match of a listing
 * written meanwhile, and the SDK's `listen` forwards it to a local receiver, signed, with the
 * saved search's id and the listing. The app has no endpoint (nothing is pushed).
 */
import t from 'tap';
import {
  apiKeyAuth,
  createMarketplaceClient,
  listen,
  newListenSecret,
  verifyWebhook,
  type Forward,
} from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { localReceiver } from '../helpers/local-receiver.ts';
import { waitUntil } from '../helpers/wait.ts';

// The plan ends the file once both tests are done: the server's idle keep-alive connections
// would otherwise keep it waiting for the teardown that closes them.
t.plan(2);
const { app, baseUrl } = await listeningApp(t);
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox', 'read listings:write searches');
const api = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });
// A sandbox saved search matches its developer's own sandbox listings.
const { data: search } = await api.savedSearches.create({ name: 'Teapots', q: 'teapot' });
const teapot = (title: string) =>
  api.listings.create({
    title,
    price_cents: 2500,
    status: 'active',
    cover_image_url: 'https://images.example.com/teapot.jpg',
  });

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function events(query: string): Promise<Json> {
  const res = await fetch(`${baseUrl}/api/v1/events?${query}`, {
    headers: { authorization: `Bearer ${key}` },
    signal: AbortSignal.timeout(45_000),
  });
  if (res.status !== 200) throw new Error(`GET /events: ${res.status}`);
  return (await res.json()) as Json;
}

t.test(
  'a long poll from a cursor is answered with the match of a listing written meanwhile',
  async (t) => {
    const now = (await events('type=listing.matched&wait=0')).meta.next_cursor as string;
    t.type(now, 'string', 'the cursor for now');
    const waiting = events(`type=listing.matched&wait=20&cursor=${encodeURIComponent(now)}`);
    const { data: listing } = await teapot('Cast iron teapot');
    const answer = await waiting;
    t.equal(answer.data.length, 1, 'one event, before the wait ran out');
    t.match(answer.data[0], {
      type: 'listing.matched',
      data: { saved_search_id: search.id, listing: { id: listing.id, title: 'Cast iron teapot' } },
    });
  },
);

t.test("the SDK's listen forwards it to a local receiver, signed", async (t) => {
  const { received, url } = await localReceiver(t);
  const stop = new AbortController();
  const forwards: Forward[] = [];
  const secret = newListenSecret();
  let ready!: () => void;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  const done = listen({
    baseUrl,
    auth: apiKeyAuth(key),
    forwardTo: url('/hooks'),
    secret,
    events: ['listing.matched'],
    signal: stop.signal,
    waitSeconds: 5,
    onReady: () => ready(),
    onForward: (forward) => forwards.push(forward),
  });
  t.teardown(async () => {
    stop.abort();
    await done;
  });
  await Promise.race([isReady, done]);
  const { data: listing } = await teapot('Enamel teapot');
  await waitUntil('the match forwarded', () => forwards.length >= 1, { timeoutMs: 15_000 });
  t.strictSame(
    forwards.map((f) => [f.type, f.status]),
    [['listing.matched', 204]],
    'only listing.matched (events filter), forwarded once',
  );
  const event = await verifyWebhook(secret, received[0]!.raw, received[0]!.headers);
  t.match(event, {
    type: 'listing.matched',
    data: { saved_search_id: search.id, listing: { id: listing.id } },
  });
  t.strictSame(await app.services.endpoints.list(developer.appId), [], 'no endpoint');
});
