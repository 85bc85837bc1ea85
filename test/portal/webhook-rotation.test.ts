/**
 * Signing-secret rotation and endpoint recovery (docs/webhooks.md), through the portal's pages
 * and against a REAL HTTPS receiver: after a rotation, for 24 hours every delivery verifies with
 * either secret (webhook-signature carries both; X-Service-Signature the old one), checked with
 * the SDK's verifier and with the standardwebhooks package; after the overlap only the new one
 * verifies. An endpoint disabled by 410 Gone, by 3 days of failures or by an operator shows why,
 * in a banner on every page of its app, and comes back only after a check ping answered 2xx.
 * Time is moved in the database (the overlap's end, the start of the failures), not waited for.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import t from 'tap';

import { COMMANDS } from '../../src/cli/admin.ts';
import { queryRows } from '../../src/db/rows.ts';
import {
  verifyServiceSignature,
  verifyWebhook,
  WebhookVerificationError,
} from '../../sdk/src/webhooks.ts';
import { listingBody } from '../helpers/listings.ts';
import { api, standardForm, startReceiver } from '../webhooks/support.ts';
import { alertOf, appWithLog, createApp, noticeOf, shownSecret, signUp } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const { app, log } = await appWithLog(t, {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_RETRY_SCHEDULE: '1,1',
});
const receiver = await startReceiver(t);
/** Answers by path; tests change them. */
const answers = new Map<string, number>();
receiver.reply = ({ path }) => ({ status: answers.get(path) ?? 200 });

const owner = await signUp(app);
const appId = await createApp(owner, 'Rotating app');
const hooksUrl = `/portal/apps/${appId}/webhooks`;
const key = await (async () => {
  const res = await owner.browser.act(`/portal/apps/${appId}/keys`, `/portal/apps/${appId}/keys`, {
    env: 'sandbox',
    scopes: ['read', 'listings:write'],
    name: 'Hooks',
  });
  return shownSecret(res.body, 'new-key')!;
})();

async function createEndpoint(path: string): Promise<{ id: string; secret: string }> {
  const res = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: receiver.url(path),
  });
  const secret = shownSecret(res.body, 'webhook-secret')!;
  receiver.secrets.set(path, secret);
  const endpoint = (await app.services.endpoints.list(appId)).find(
    (e) => e.url === receiver.url(path),
  )!;
  return { id: endpoint.id, secret };
}

/** Creates a listing with the app's key and waits for its delivery at `path`. */
async function deliveryTo(path: string) {
  const before = receiver.to(path).length;
  const res = await api(app, 'POST', '/api/v1/listings', key, listingBody());
  t.equal(res.status, 201);
  return waitUntil(`a delivery to ${path}`, () => receiver.to(path)[before]);
}

const rejects = (work: Promise<unknown>) =>
  work.then(
    () => false,
    (err: unknown) => err instanceof WebhookVerificationError,
  );

t.test('rotation: both secrets sign for 24 hours, then only the new one', async (t) => {
  const endpoint = await createEndpoint('/rotating');
  const old = endpoint.secret;
  const url = `${hooksUrl}/${endpoint.id}`;

  const rotated = await owner.browser.act(url, `${url}/secret`, {});
  t.equal(rotated.statusCode, 201);
  const fresh = shownSecret(rotated.body, 'webhook-secret')!;
  t.match(fresh, /^svc_whsec_[A-Za-z0-9+/]{43}=$/, 'the new secret is shown once');
  t.not(fresh, old);
  t.match(rotated.body, /previous secret keeps signing until <time datetime="/);
  t.match(rotated.headers['cache-control'], /no-store/);
  const page = await owner.browser.get(url);
  t.notOk(page.body.includes(fresh), 'not shown again');
  t.match(page.body, /Rotated: the previous secret also signs until <time/);

  // The receiver has changed nothing yet: it still verifies with the old secret.
  const during = await deliveryTo('/rotating');
  t.equal(during.verifyError, null, 'a receiver on the old secret keeps working');
  const headers = during.headers as Record<string, string>;
  t.equal(headers['webhook-signature']!.split(' ').length, 2, 'two v1 entries');
  t.ok(await verifyWebhook(fresh, during.raw, headers), 'verifies with the new secret');
  t.ok(await verifyWebhook(old, during.raw, headers), 'and with the old one');
  t.ok(await verifyWebhook([fresh, old], during.raw, headers), 'and with both');
  // The one step docs/webhooks.md gives for the Standard Webhooks libraries: without `svc_`.
  const standard = (secret: string) => new Webhook(secret.replace(/^svc_/, ''));
  t.ok(standard(fresh).verify(during.raw.toString(), headers), 'standardwebhooks, default mode');
  t.ok(standard(old).verify(during.raw.toString(), headers));
  t.doesNotThrow(
    () => new SvixWebhook(fresh.replace(/^svc_/, '')).verify(during.raw.toString(), headers),
    'svix, default mode',
  );
  const legacy = headers['x-service-signature'];
  t.ok(await verifyServiceSignature(old, during.raw, legacy), 'X-Service-Signature: the old one');
  t.ok(await verifyServiceSignature([fresh, old], during.raw, legacy), 'accepted with both');
  t.ok(await rejects(verifyServiceSignature(fresh, during.raw, legacy)), 'not the new one yet');

  await app.db.execute(
    sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second'
        where id = ${endpoint.id}`,
  );
  receiver.secrets.set('/rotating', fresh);
  const after = await deliveryTo('/rotating');
  t.equal(after.verifyError, null, 'the new secret verifies both headers');
  const afterHeaders = after.headers as Record<string, string>;
  t.equal(afterHeaders['webhook-signature']!.split(' ').length, 1, 'one v1 entry');
  t.ok(await rejects(verifyWebhook(old, after.raw, afterHeaders)), 'the old secret no longer');
  t.throws(() => standard(old).verify(after.raw.toString(), afterHeaders));
  t.ok(await rejects(verifyServiceSignature(old, after.raw, afterHeaders['x-service-signature'])));
  t.notMatch((await owner.browser.get(url)).body, /Rotated: the previous secret/);

  const cli = (await COMMANDS['webhook rotate-secret']!.run(
    app.services,
    new Map([['id', [endpoint.id]]]),
  )) as { id: string; secret: string; previous_secret_expires_at: string };
  t.equal(cli.id, endpoint.id);
  t.match(cli.secret, /^svc_whsec_[A-Za-z0-9+/]{43}=$/);
  const in24h = Date.now() + 86_400_000;
  t.ok(Math.abs(new Date(cli.previous_secret_expires_at).getTime() - in24h) < 60_000);
  for (const secret of [fresh, cli.secret, old]) {
    t.notOk(log().includes(secret.slice('svc_whsec_'.length)), 'no secret in the log');
  }
});

t.test(
  'a secret issued before the standard form: unchanged, then migrated by rotation',
  async (t) => {
    // An endpoint made before secrets took the `svc_whsec_` + base64 form kept its
    // `svc_whsec_` + base64url secret (as the migration-free upgrade leaves it, the shape
    // generateSecret gave: 43 characters, no `=`): it signs as it always did, until rotated.
    const endpoint = await createEndpoint('/legacy');
    const legacy = `svc_whsec_${randomBytes(32).toString('base64url')}`;
    await app.db.execute(
      sql`update webhook_endpoints set secret = ${legacy} where id = ${endpoint.id}`,
    );
    receiver.secrets.set('/legacy', legacy);
    const before = await deliveryTo('/legacy');
    t.equal(before.verifyError, null, 'its receiver verifies as before (SDK, standard form)');
    const beforeHeaders = before.headers as Record<string, string>;
    t.equal(
      beforeHeaders['x-service-signature'],
      createHmac('sha256', legacy).update(before.raw).digest('hex'),
      'X-Service-Signature: keyed with the secret as printed',
    );
    t.ok(
      new Webhook(legacy, { format: 'raw' }).verify(before.raw.toString(), beforeHeaders),
      "a receiver configured the old way (format: 'raw') keeps working",
    );

    const url = `${hooksUrl}/${endpoint.id}`;
    const rotated = await owner.browser.act(url, `${url}/secret`, {});
    const fresh = shownSecret(rotated.body, 'webhook-secret')!;
    t.match(fresh, /^svc_whsec_[A-Za-z0-9+/]{43}=$/, 'the rotation gives one of the current form');
    const during = await deliveryTo('/legacy');
    t.equal(during.verifyError, null, 'the unchanged receiver keeps working during the overlap');
    const headers = during.headers as Record<string, string>;
    t.ok(new Webhook(legacy, { format: 'raw' }).verify(during.raw.toString(), headers));
    const standard = fresh.replace(/^svc_/, '');
    t.ok(new Webhook(standard).verify(during.raw.toString(), headers), 'the new one, default mode');
    t.doesNotThrow(() => new SvixWebhook(standard).verify(during.raw.toString(), headers), 'svix');
    t.ok(await verifyWebhook([fresh, legacy], during.raw, headers), 'the SDK, with both');
    t.ok(
      await verifyServiceSignature(legacy, during.raw, headers['x-service-signature']),
      'X-Service-Signature stays on the old secret for the overlap',
    );

    await app.db.execute(
      sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second'
        where id = ${endpoint.id}`,
    );
    receiver.secrets.set('/legacy', fresh);
    const after = await deliveryTo('/legacy');
    t.equal(after.verifyError, null, 'after the overlap the standard secret verifies both headers');
    t.equal(
      (after.headers as Record<string, string>)['x-service-signature'],
      createHmac('sha256', fresh).update(after.raw).digest('hex'),
    );
    t.equal(standardForm(fresh), standard, 'the receiver helper uses the documented step');
  },
);

t.test(
  '410 Gone disables; the banner says so; re-enable only after a 2xx check ping',
  async (t) => {
    const endpoint = await createEndpoint('/gone-then-back');
    answers.set('/gone-then-back', 410);
    await deliveryTo('/gone-then-back');
    await waitUntil('the endpoint to be disabled', async () =>
      (await app.services.endpoints.details(endpoint.id)).active ? undefined : true,
    );
    const details = await app.services.endpoints.details(endpoint.id);
    t.equal(details.disabled_reason, 'The endpoint answered 410 Gone.');

    for (const page of ['', '/keys', '/webhooks', '/oauth']) {
      const res = await owner.browser.get(`/portal/apps/${appId}${page}`);
      t.match(
        res.body,
        /A webhook endpoint is disabled/,
        `the banner on ${page || 'the overview'}`,
      );
      t.match(res.body, /gone-then-back<\/a> \(sandbox\): The endpoint answered 410 Gone\./);
    }

    const url = `${hooksUrl}/${endpoint.id}`;
    answers.set('/gone-then-back', 503);
    const refused = await owner.browser.act(url, `${url}/enable`, {});
    t.equal(refused.statusCode, 409);
    t.equal(alertOf(refused.body), 'The check ping was answered 503; the endpoint stays disabled.');
    t.notOk((await app.services.endpoints.details(endpoint.id)).active);

    answers.set('/gone-then-back', 200);
    const checks = receiver.to('/gone-then-back').length;
    const enabled = await owner.browser.act(url, `${url}/enable`, {});
    t.equal(enabled.statusCode, 303);
    const page = await owner.browser.get(String(enabled.headers.location));
    t.equal(noticeOf(page.body), 'The check ping was answered, and the endpoint is enabled again.');
    t.notMatch(page.body, /A webhook endpoint is disabled/, 'the banner is gone');
    const check = receiver.to('/gone-then-back')[checks]!;
    t.equal(check.verifyError, null, 'the check ping is signed like any delivery');
    t.equal(check.event?.type, 'ping');
    const back = await deliveryTo('/gone-then-back');
    t.equal(back.status, 200, 'deliveries flow again');
  },
);

t.test('3 days of only failures disable an endpoint; a success resets the clock', async (t) => {
  const endpoint = await createEndpoint('/failing');
  answers.set('/failing', 500);
  await deliveryTo('/failing');
  await waitUntil('the failure clock to start', async () => {
    const [row] = await queryRows<{ failing_since: unknown }>(
      app.db,
      sql`select failing_since from webhook_endpoints where id = ${endpoint.id}`,
    );
    return row?.failing_since ?? undefined;
  });
  t.ok((await app.services.endpoints.details(endpoint.id)).active, 'a day of failures is not 3');

  await app.db.execute(
    sql`update webhook_endpoints set failing_since = now() - interval '3 days 1 minute'
        where id = ${endpoint.id}`,
  );
  await deliveryTo('/failing');
  const disabled = await waitUntil('the endpoint to be disabled', async () => {
    const d = await app.services.endpoints.details(endpoint.id);
    return d.active ? undefined : d;
  });
  t.equal(disabled.disabled_reason, 'Every delivery failed for 3 days.');
  const banner = await owner.browser.get(`/portal/apps/${appId}`);
  t.match(banner.body, /failing<\/a> \(sandbox\): Every delivery failed for 3 days\./);

  // Another endpoint that fails but succeeded since: its clock was reset by the success.
  const flaky = await createEndpoint('/flaky');
  answers.set('/flaky', 500);
  await deliveryTo('/flaky');
  await app.db.execute(
    sql`update webhook_endpoints set failing_since = now() - interval '2 days' where id = ${flaky.id}`,
  );
  answers.set('/flaky', 200);
  await deliveryTo('/flaky');
  await waitUntil('the success to reset the clock', async () => {
    const [row] = await queryRows<{ failing_since: unknown }>(
      app.db,
      sql`select failing_since from webhook_endpoints where id = ${flaky.id}`,
    );
    return row && row.failing_since === null ? true : undefined;
  });
  t.pass('a success resets failing_since');
});

t.test('an operator disables and enables from the CLI, with the same service', async (t) => {
  const endpoint = await createEndpoint('/operated');
  const run = (command: string) =>
    COMMANDS[command]!.run(app.services, new Map([['id', [endpoint.id]]]));
  t.same(await run('webhook disable'), {
    id: endpoint.id,
    active: false,
    disabled_reason: 'Disabled by an operator.',
  });
  await t.rejects(run('webhook disable'), { message: 'This endpoint is already disabled.' });
  const ping = await owner.browser.submit({}, `${hooksUrl}/${endpoint.id}/ping`);
  t.equal(
    alertOf(ping.body),
    'This endpoint is disabled (Disabled by an operator.) Re-enable it first.',
  );
  t.same(await run('webhook enable'), { id: endpoint.id, active: true, ping_response_code: 200 });
  await t.rejects(run('webhook enable'), { message: 'This endpoint is already enabled.' });
});

t.test("another user's endpoint cannot be rotated or enabled", async (t) => {
  const endpoint = await createEndpoint('/mine');
  const stranger = await signUp(app);
  const strangerApp = await createApp(stranger);
  for (const action of ['secret', 'enable']) {
    await stranger.browser.get(`/portal/apps/${strangerApp}/webhooks`);
    const res = await stranger.browser.submit(
      {},
      `/portal/apps/${strangerApp}/webhooks/${endpoint.id}/${action}`,
    );
    t.equal(res.statusCode, 404, action);
  }
});
