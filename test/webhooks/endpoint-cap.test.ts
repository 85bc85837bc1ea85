/**
 * At most 16 active webhook endpoints per app and environment (docs/webhooks.md, "Endpoints"):
 * one write fans out to at most 16 deliveries. The 17th is refused with 409 `conflict` by the
 * service and the portal (the CLI's refusal is in cli.test.ts); disabled endpoints do not count,
 * the developer can disable one in the portal to make room, and enabling one is refused while 16
 * are active. Each environment has its own 16.
 */
import t from 'tap';
import { MAX_ACTIVE_ENDPOINTS } from '../../src/webhooks/endpoints-service.ts';
import { alertOf, appWithLog, createApp, noticeOf, signUp } from '../portal/support.ts';

const { app } = await appWithLog(t);
const owner = await signUp(app);
const appId = await createApp(owner, 'Many hooks');
const hooksUrl = `/portal/apps/${appId}/webhooks`;

/** Public addresses: nothing is delivered in this file (no event is recorded). */
const urlOf = (i: number) => `https://93.184.215.14/hook-${i}`;

const CAP_MESSAGE = new RegExp(
  `already has ${MAX_ACTIVE_ENDPOINTS} active sandbox webhook endpoints`,
);

t.test('the 17th active endpoint is refused, by the service and the portal', async (t) => {
  t.equal(MAX_ACTIVE_ENDPOINTS, 16, 'the documented cap');
  // Two at once for the last place: the app's row is locked for the count, one wins.
  for (let i = 0; i < MAX_ACTIVE_ENDPOINTS - 1; i += 1)
    await app.services.endpoints.create({ appId, env: 'sandbox', url: urlOf(i) });
  const raced = await Promise.allSettled([
    app.services.endpoints.create({ appId, env: 'sandbox', url: urlOf(100) }),
    app.services.endpoints.create({ appId, env: 'sandbox', url: urlOf(101) }),
  ]);
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'one of two racers gets it');
  t.match(
    raced.find((r) => r.status === 'rejected'),
    { reason: { statusCode: 409, code: 'conflict', message: CAP_MESSAGE } },
  );
  t.equal((await app.services.endpoints.list(appId)).length, MAX_ACTIVE_ENDPOINTS);

  const page = await owner.browser.act(hooksUrl, hooksUrl, { env: 'sandbox', url: urlOf(17) });
  t.equal(page.statusCode, 409, 'the portal answers 409');
  t.match(alertOf(page.body), CAP_MESSAGE, 'with the reason, in the alert');
  t.match(page.body, urlOf(17), 'the form keeps what was typed');
  t.equal((await app.services.endpoints.list(appId)).length, MAX_ACTIVE_ENDPOINTS, 'none added');
});

t.test('disabling one makes room; enabling is refused while 16 are active', async (t) => {
  const [first] = await app.services.endpoints.list(appId);
  const endpointUrl = `${hooksUrl}/${first!.id}`;
  const disabled = await owner.browser.act(endpointUrl, `${endpointUrl}/disable`);
  t.equal(disabled.statusCode, 303, 'the developer disables an endpoint in the portal');
  const shown = await owner.browser.get(String(disabled.headers.location));
  t.match(noticeOf(shown.body), /endpoint is disabled/);
  t.match(await app.services.endpoints.show(first!.id), { active: false });
  t.match((await app.services.endpoints.details(first!.id)).disabled_reason, /developer/);

  const added = await owner.browser.act(hooksUrl, hooksUrl, { env: 'sandbox', url: urlOf(18) });
  t.equal(added.statusCode, 201, 'a new endpoint fits again');

  const enabling = await owner.browser.act(endpointUrl, `${endpointUrl}/enable`);
  t.equal(enabling.statusCode, 409, 're-enabling the disabled one is refused');
  t.match(alertOf(enabling.body), CAP_MESSAGE);
  t.match(await app.services.endpoints.show(first!.id), { active: false }, 'it stays disabled');
});

t.test('each environment has its own 16', async (t) => {
  await app.services.apps.completeMilestone(appId, 'sandbox_listing');
  await app.services.apps.approve(appId);
  const live = await app.services.endpoints.create({ appId, env: 'live', url: urlOf(200) });
  t.match(live, { env: 'live' }, 'a live endpoint while sandbox is full');
});
