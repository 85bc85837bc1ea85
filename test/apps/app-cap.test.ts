/**
 * At most 25 apps per developer account (OpenAPI "Saved searches", "Budgets"; issue #55): the
 * quotas counted per app (saved searches, endpoints, keys, long-poll places) cannot be multiplied
 * by making more apps. The 26th is refused with 409 `conflict` by the service and the portal;
 * two creations racing for the last place cannot both win; a deleted app frees its place.
 */
import t from 'tap';
import { APPS_PER_OWNER } from '../../src/apps/apps-service.ts';
import { alertOf, appWithLog, createApp, signUp } from '../portal/support.ts';

const { app } = await appWithLog(t);
const owner = await signUp(app);
const CAP_MESSAGE = new RegExp(`has ${APPS_PER_OWNER} apps, the most one developer may have`);
const create = (name: string) => app.services.apps.create({ ownerUsername: owner.username, name });

t.test('the 26th app is refused, by the service and the portal', async (t) => {
  t.equal(APPS_PER_OWNER, 25, 'the documented cap');
  const first = await createApp(owner, 'first');
  for (let i = 2; i < APPS_PER_OWNER; i += 1) await create(`app ${i}`);
  const raced = await Promise.allSettled([create('racer a'), create('racer b')]);
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'one of two racers gets it');
  t.match(
    raced.find((r) => r.status === 'rejected'),
    { reason: { statusCode: 409, code: 'conflict', message: CAP_MESSAGE } },
  );
  const page = await owner.browser.act('/portal/apps', '/portal/apps', { name: 'one too many' });
  t.equal(page.statusCode, 409, 'the portal answers 409');
  t.match(alertOf(page.body), CAP_MESSAGE, 'with the reason, in the alert');
  const ownerId = (await app.services.apps.get(first)).ownerId;
  t.equal((await app.services.apps.listOwned(ownerId)).length, APPS_PER_OWNER, 'none added');

  await app.services.apps.delete(first, 'first');
  t.ok(await create('after a deletion'), 'a deleted app frees its place');
});
