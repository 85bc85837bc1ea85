/**
 * `marketplace-listings-sdk trigger TYPE` (sdk/src/cli.ts, run from source; issue #59 item 7)
 * against a live server with its delivery worker: each type's test event is heard by the `listen`
 * command (its forward verified by the standardwebhooks package in its default mode with the
 * secret listen printed) and delivered to the app's endpoint that enabled it (verified by the
 * same package, svix and the SDK in test/webhooks/support.ts's HTTPS receiver); `--endpoint`
 * sends to that endpoint only; a live key, an OAuth token and an unknown type are refused with
 * a clear line before anything is sent.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { localReceiver } from '../helpers/local-receiver.ts';
import { waitUntil } from '../helpers/wait.ts';
import { runCli } from './support.ts';
import { startReceiver, type Json } from '../webhooks/support.ts';

// Ends the file once the tests are done (the app's idle keep-alive connections would hold it).
t.plan(3);
const TYPES = ['listing.created', 'listing.updated', 'listing.archived', 'listing.matched'];
const { app, baseUrl } = await listeningApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const developer = await createDeveloper(app);
const key = await createKey(app, developer, 'sandbox', 'read webhooks:write');
const receiver = await startReceiver(t);
const all = await app.services.endpoints.create({
  appId: developer.appId,
  env: 'sandbox',
  url: receiver.url('/all'),
});
receiver.secrets.set('/all', all.secret);
const archived = await app.services.endpoints.create({
  appId: developer.appId,
  env: 'sandbox',
  url: receiver.url('/archived'),
  enabledEvents: ['listing.archived'],
});
receiver.secrets.set('/archived', archived.secret);
const forwarded = await localReceiver(t);
const work = mkdtempSync(path.join(tmpdir(), 'trigger-cli-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

/** Starts the command from source; stops it (SIGINT) in teardown. */
function command(t: Test, args: string[], env: Record<string, string> = {}) {
  return runCli(t, args, { key, baseUrl, configHome: path.join(work, 'config'), env });
}

t.test('each type: heard by listen and delivered to the endpoint that enabled it', async (t) => {
  const listening = command(t, ['listen', '--forward-to', forwarded.url('/hooks')]);
  await waitUntil('listen ready', () => /Ctrl-C to stop/.test(listening.out()), {
    timeoutMs: 30_000,
  });
  const secret = /Signing secret: (whsec_\S+)/.exec(listening.out())?.[1];
  t.ok(secret, 'listen printed its secret');
  for (const type of TYPES) {
    const run = command(t, ['trigger', type]);
    t.equal(await run.exitCode(), 0, `${type}: exits 0 (${run.err()})`);
    const sent = /Sent (\S+) test event ([0-9a-f]{32}) to (\d+) endpoints?\./.exec(run.out());
    t.ok(sent, `${type}: says what it sent (${run.out()})`);
    const [, sentType, eventId, count] = sent!;
    t.equal(sentType, type);
    t.equal(Number(count), type === 'listing.archived' ? 2 : 1, `${type}: where enabled`);

    const heard = await waitUntil(`${type}: forwarded by listen`, () =>
      forwarded.received.find((r) => JSON.parse(r.raw).event_id === eventId),
    );
    const verified = new Webhook(secret!).verify(
      heard.raw,
      heard.headers as Record<string, string>,
    ) as Json;
    t.equal(verified.type, type, `${type}: listen's forward verifies (standardwebhooks)`);
    t.equal(verified.data.test, true, `${type}: marked as a test`);

    const delivered = await waitUntil(`${type}: delivered to /all`, () =>
      receiver.to('/all').find((r) => r.event?.event_id === eventId || r.verifyError),
    );
    t.equal(delivered.verifyError, null, `${type}: the delivery verifies (standardwebhooks, svix)`);
    t.equal(delivered.event?.type, type);
  }
  await waitUntil('the archived one at /archived', () => receiver.to('/archived').length >= 1);
  t.strictSame(
    receiver.to('/archived').map((r) => r.event?.type),
    ['listing.archived'],
    'not to an endpoint that did not enable the type',
  );
});

t.test('--endpoint: that endpoint only, if it enabled the type', async (t) => {
  const before = receiver.to('/all').length;
  const run = command(t, ['trigger', 'listing.archived', '--endpoint', archived.id]);
  t.equal(await run.exitCode(), 0, run.err());
  t.match(run.out(), /to 1 endpoint\./);
  const eventId = /test event ([0-9a-f]{32})/.exec(run.out())![1];
  await waitUntil('delivered to /archived', () =>
    receiver.to('/archived').some((r) => r.event?.event_id === eventId),
  );
  t.equal(receiver.to('/all').length, before, 'not to the other endpoint');

  const refused = command(t, ['trigger', 'listing.created', '--endpoint', archived.id]);
  t.equal(await refused.exitCode(), 1);
  t.match(refused.err(), /The API refused: 400 .*did not enable listing\.created/);
});

t.test('refused before sending: a live key, an OAuth token, an unknown type', async (t) => {
  const live = await createKey(app, developer, 'live', 'read webhooks:write');
  const events = async () => {
    const res = await fetch(`${baseUrl}/api/v1/events?limit=100`, {
      headers: { authorization: `Bearer ${key}` },
    });
    return ((await res.json()) as Json).data.length as number;
  };
  const count = await events();
  const byLive = command(t, ['trigger', 'listing.created'], { MARKETPLACE_KEY: live });
  t.equal(await byLive.exitCode(), 2);
  t.match(byLive.err(), /MARKETPLACE_KEY is a live key .*sandbox only/);
  const byToken = command(t, ['trigger', 'listing.created'], {
    MARKETPLACE_KEY: `svc_oauth_${'a'.repeat(40)}`,
  });
  t.equal(await byToken.exitCode(), 2);
  t.match(byToken.err(), /an OAuth access token: test events are sandbox only/);
  const unknown = command(t, ['trigger', 'listing.deleted']);
  t.equal(await unknown.exitCode(), 2);
  t.match(unknown.err(), /Unknown event type listing\.deleted: choose one of listing\.created/);
  t.equal(await events(), count, 'nothing was recorded');

  const help = command(t, ['trigger', '--help']);
  t.equal(await help.exitCode(), 0);
  t.match(help.out(), /trigger TYPE/);
  t.match(help.out(), /--endpoint ID/);
});
