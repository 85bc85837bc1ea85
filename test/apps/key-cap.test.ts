/**
 * At most 50 active API keys per app and environment (docs/portal.md, OpenAPI listEvents; issue
 * #43 item 4): one developer cannot mint keys without end (each key has long-poll places and a
 * rate limit of its own). The 51st is refused with 409 `conflict` by the service and the portal
 * (the CLI's refusal is in test/webhooks/cli.test.ts); two creations racing for the last place
 * cannot both win; a revoked key, or a rolled one past its expiry, frees its place; a roll whose
 * old key keeps working needs a place, one that stops the old key now does not; each
 * environment has its own 50.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { MAX_ACTIVE_KEYS } from '../../src/apps/keys-service.ts';
import { alertOf, appWithLog, createApp, shownSecret, signUp } from '../portal/support.ts';

const { app } = await appWithLog(t);
const owner = await signUp(app);
const appId = await createApp(owner, 'Many keys');
const keysUrl = `/portal/apps/${appId}/keys`;
const { keys } = app.services;

const CAP_MESSAGE = new RegExp(`already has ${MAX_ACTIVE_KEYS} active sandbox API keys`);
const activeCount = async (env = 'sandbox') =>
  (await keys.list(appId)).filter(
    (k) =>
      k.environment === env &&
      k.revokedAt === null &&
      (k.expiresAt === null || k.expiresAt > new Date()),
  ).length;
const portalCreate = (name: string, env = 'sandbox') =>
  owner.browser.act(keysUrl, keysUrl, { env, scopes: ['read'], name });

t.test('the 51st active key is refused, by the service and the portal', async (t) => {
  t.equal(MAX_ACTIVE_KEYS, 50, 'the documented cap');
  for (let i = 0; i < MAX_ACTIVE_KEYS - 1; i += 1)
    await keys.create({ appId, env: 'sandbox', name: `key ${i}` });
  // Two at once for the last place: the app's row is locked for the count, one wins.
  const raced = await Promise.allSettled([
    keys.create({ appId, env: 'sandbox', name: 'racer a' }),
    keys.create({ appId, env: 'sandbox', name: 'racer b' }),
  ]);
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'one of two racers gets it');
  t.match(
    raced.find((r) => r.status === 'rejected'),
    { reason: { statusCode: 409, code: 'conflict', message: CAP_MESSAGE } },
  );
  t.equal(await activeCount(), MAX_ACTIVE_KEYS);

  const page = await portalCreate('one too many');
  t.equal(page.statusCode, 409, 'the portal answers 409');
  t.match(alertOf(page.body), CAP_MESSAGE, 'with the reason, in the alert');
  t.notOk(shownSecret(page.body, 'new-key'), 'and shows no key');
  t.equal(await activeCount(), MAX_ACTIVE_KEYS, 'none added');
});

t.test('revoking one makes room', async (t) => {
  const [first] = await keys.list(appId);
  await keys.revoke(first!.id, { appId });
  const page = await portalCreate('after a revocation');
  t.equal(page.statusCode, 201, 'a new key fits again');
  t.ok(shownSecret(page.body, 'new-key'), 'shown once');
  t.equal(await activeCount(), MAX_ACTIVE_KEYS);
});

t.test('a roll needs a place while the old key keeps working', async (t) => {
  const active = (await keys.list(appId)).filter((k) => k.revokedAt === null);
  await t.rejects(keys.roll(active[0]!.id, '24h', { appId }), {
    statusCode: 409,
    code: 'conflict',
    message: /cannot keep working beside its replacement/,
  });
  const rolled = await keys.roll(active[0]!.id, 'now', { appId });
  t.ok(rolled.key, "rolled to stop now: the replacement takes the old key's place");
  t.equal(await activeCount(), MAX_ACTIVE_KEYS);

  // A rolled key whose overlap is over frees its place as well.
  await keys.revoke(active[1]!.id, { appId });
  const overlapping = await keys.roll(active[2]!.id, '1h', { appId });
  t.ok(overlapping.key, 'with a free place, the old key keeps working an hour');
  await t.rejects(keys.create({ appId, env: 'sandbox' }), {
    statusCode: 409,
    message: CAP_MESSAGE,
  });
  await app.database.db.execute(
    sql`update api_keys set expires_at = now() - interval '1 second' where id = ${active[2]!.id}`,
  );
  t.ok((await keys.create({ appId, env: 'sandbox' })).key, 'once it expired, its place is free');
});

t.test('each environment has its own 50', async (t) => {
  await app.services.apps.completeMilestone(appId, 'sandbox_listing');
  await app.services.apps.approve(appId);
  const live = await keys.create({ appId, env: 'live' });
  t.match(live, { env: 'live' }, 'a live key while sandbox is full');
});
