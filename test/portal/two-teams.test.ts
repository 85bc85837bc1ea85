/**
 * Two teams on the same data (issue #61, tests: "two teams on the same data"): one account holds
 * two apps, so both apps' keys act as the same seller and see the same sandbox listings; each app
 * has its own team, and a member sees and changes only the apps they are a member of, with the
 * role they have in each, whatever the ids they post.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { listingBody } from '../helpers/listings.ts';
import { api } from '../webhooks/support.ts';
import { appWithLog, createApp, createKeyInPortal, signUp } from './support.ts';

const { app } = await appWithLog(t);
const holder = await signUp(app);
const alpha = await createApp(holder, 'Team alpha app');
const beta = await createApp(holder, 'Team beta app');
const alphaDev = await signUp(app);
const betaDev = await signUp(app);
const both = await signUp(app);
const add = (appId: string, username: string, role: 'developer' | 'viewer') =>
  app.services.apps.addMember(appId, { username, role }, 'admin_cli');
await add(alpha, alphaDev.username, 'developer');
await add(beta, betaDev.username, 'developer');
await add(alpha, both.username, 'developer');
await add(beta, both.username, 'viewer');
const url = (appId: string, rest = '') => `/portal/apps/${appId}${rest}`;

const alphaKey = await createKeyInPortal(alphaDev, alpha, { name: 'Alpha sync' });
const betaKey = await createKeyInPortal(betaDev, beta, { name: 'Beta sync' });
const keyIdOf = async (appId: string) =>
  (await app.services.keys.list(appId)).find((k) => k.revokedAt === null)!.id;

t.test('the same data: both apps act as their holder, one sandbox', async (t) => {
  const made = await api(app, 'POST', '/api/v1/listings', alphaKey, listingBody({ title: 'Lamp' }));
  t.equal(made.status, 201);
  const seen = await api(app, 'GET', `/api/v1/listings/${made.body.data.id}`, betaKey);
  t.equal(seen.status, 200, "beta's key sees alpha's sandbox listing: the same seller");
  for (const [user, appId] of [
    [alphaDev, alpha],
    [betaDev, beta],
  ] as const) {
    const page = await user.browser.get(url(appId, '/inventory'));
    t.match(page.body, 'Lamp', "each team's inventory page shows it");
  }
});

t.test("each team's members see only their app", async (t) => {
  for (const rest of ['', '/keys', '/webhooks', '/members', '/logs']) {
    t.equal((await alphaDev.browser.get(url(alpha, rest))).statusCode, 200);
    t.equal((await alphaDev.browser.get(url(beta, rest))).statusCode, 404, `beta${rest}: 404`);
    t.equal((await betaDev.browser.get(url(alpha, rest))).statusCode, 404, `alpha${rest}: 404`);
  }
  const apps = (await both.browser.get('/portal/apps')).body;
  t.match(apps, 'Team alpha app');
  t.match(apps, 'Team beta app');
  const keys = (await alphaDev.browser.get(url(alpha, '/keys'))).body;
  t.match(keys, 'Alpha sync');
  t.notMatch(keys, 'Beta sync', "the other team's keys are not listed");
});

t.test('each team changes only its app, whatever ids it posts', async (t) => {
  const betaKeyId = await keyIdOf(beta);
  const before = await queryRows(
    app.db,
    sql`select id, name, revoked_at from api_keys order by id`,
  );
  const revoke = await alphaDev.browser.act(url(alpha, '/keys'), url(alpha, '/keys/revoke'), {
    key_id: betaKeyId,
  });
  t.equal(revoke.statusCode, 404, "beta's key through alpha's form: not found");
  const rename = await alphaDev.browser.act(
    url(alpha, '/keys'),
    url(alpha, `/keys/${betaKeyId}/name`),
    { name: 'Taken over' },
  );
  t.equal(rename.statusCode, 404);
  const direct = await alphaDev.browser.act(url(alpha, '/keys'), url(beta, '/keys/revoke'), {
    key_id: betaKeyId,
  });
  t.equal(direct.statusCode, 404, "beta's own form: not found to alpha's developer");
  t.same(
    await queryRows(app.db, sql`select id, name, revoked_at from api_keys order by id`),
    before,
    'no key changed',
  );
  t.equal((await api(app, 'GET', '/api/v1/me', betaKey)).status, 200, "beta's key still works");
});

t.test('a member of both has the role of each app', async (t) => {
  const inAlpha = await createKeyInPortal(both, alpha, { name: 'Both in alpha' });
  t.ok(inAlpha, 'a developer in alpha creates a sandbox key');
  const inBeta = await both.browser.act(url(beta, '/keys'), url(beta, '/keys'), {
    env: 'sandbox',
    scopes: ['read'],
    name: 'Both in beta',
  });
  t.equal(inBeta.statusCode, 403, 'a viewer in beta cannot');
  t.notOk(
    (await app.services.keys.list(beta)).some((k) => k.name === 'Both in beta'),
    'and no key was made',
  );
  await app.services.apps.removeMember(alpha, both.username, 'admin_cli');
  t.equal((await both.browser.get(url(alpha, '/keys'))).statusCode, 404, 'removed from alpha');
  t.equal((await both.browser.get(url(beta, '/keys'))).statusCode, 200, 'still in beta');
});
