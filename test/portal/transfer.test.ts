/**
 * Transferring an app's account (issue #61: an owner may transfer ownership; docs/portal.md
 * "Transferring the app"): from the Settings page (reviewed, then confirmed, CSRF-protected) and
 * `admin app transfer`; only an owner, only to a member; the app's keys act as the new holder
 * from the very next request; the holder and last-owner rules hold afterwards; the audit log
 * records it, and nothing for a refused one.
 */
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { keyChangeHeard } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { api } from '../webhooks/support.ts';
import {
  adminCli,
  alertOf,
  appWithLog,
  createApp,
  createKeyInPortal,
  noticeOf,
  signUp,
  type PortalUser,
} from './support.ts';

const { app } = await appWithLog(t);
const holder = await signUp(app);
const owner = await signUp(app);
const admin = await signUp(app);
const developer = await signUp(app);
const outsider = await signUp(app);

/** A fresh app of the holder with an owner, an admin and a developer besides. */
async function teamApp(): Promise<{ appId: string; settings: string; transfer: string }> {
  const appId = await createApp(holder);
  for (const [user, role] of [
    [owner, 'owner'],
    [admin, 'admin'],
    [developer, 'developer'],
  ] as const)
    await app.services.apps.addMember(appId, { username: user.username, role }, 'admin_cli');
  const settings = `/portal/apps/${appId}/settings`;
  return { appId, settings, transfer: `${settings}/transfer` };
}

/** The account holder, the members' roles and the audit log's actions: equal when unchanged. */
async function state(appId: string): Promise<string> {
  const rows = await Promise.all([
    queryRows(app.db, sql`select owner_id from apps where id = ${appId}`),
    queryRows(
      app.db,
      sql`select user_id, role from app_members where app_id = ${appId} order by user_id`,
    ),
    queryRows(app.db, sql`select action from audit_events where app_id = ${appId} order by id`),
  ]);
  return JSON.stringify(rows);
}

const holderOf = async (appId: string) => (await app.services.apps.get(appId)).ownerUsername;
const roles = async (appId: string) =>
  Object.fromEntries(
    (await app.services.apps.members(appId)).map((m) => [m.username, m.role]),
  ) as Record<string, string>;
const lastAudit = async (appId: string) =>
  (await app.services.audit.page(appId, { limit: 1 })).entries[0];

/** The review, then the confirmation, as a member's browser posts them from the Settings page. */
async function transferInPortal(
  by: PortalUser,
  urls: { settings: string; transfer: string },
  form: { username: string; previous_role?: string },
  confirm = form.username,
) {
  const reviewed = await by.browser.act(urls.settings, urls.transfer, form);
  if (reviewed.statusCode !== 200) return reviewed;
  return by.browser.submit({ ...form, confirm }, urls.transfer);
}

t.test('an owner transfers on the Settings page: reviewed, confirmed, at once', async (t) => {
  const urls = await teamApp();
  const { appId } = urls;
  const key = await createKeyInPortal(holder, appId, { name: 'Sync' });
  const before = await api(app, 'POST', '/api/v1/listings', key, listingBody({ title: 'Old' }));
  t.equal(before.status, 201, 'a sandbox listing of the holder, made with the key');
  t.equal((await api(app, 'GET', '/api/v1/me', key)).body.data.username, holder.username);

  const page = await owner.browser.get(urls.settings);
  t.match(page.body, "Transfer the app's account", 'owners see the transfer form');
  t.notMatch((await admin.browser.get(urls.settings)).body, 'Review the transfer', 'admins do not');

  const reviewed = await owner.browser.act(urls.settings, urls.transfer, {
    username: developer.username,
    previous_role: 'admin',
  });
  t.equal(reviewed.statusCode, 200, 'the review');
  t.match(reviewed.body, `the app's API keys (sandbox and live) act as @${developer.username}`);
  t.match(reviewed.body, `stay with their seller, @${holder.username}`);
  const unchanged = await state(appId);
  t.equal(await holderOf(appId), holder.username, 'the review changes nothing');

  const wrong = await owner.browser.submit(
    { username: developer.username, previous_role: 'admin', confirm: 'someone' },
    urls.transfer,
  );
  t.equal(wrong.statusCode, 400, 'a wrong confirmation is refused');
  t.match(alertOf(wrong.body), `Type the new holder's username, ${developer.username}`);
  t.equal(await state(appId), unchanged, 'and changes nothing');

  const done = await owner.browser.submit(
    { username: developer.username, previous_role: 'admin', confirm: developer.username },
    urls.transfer,
  );
  t.equal(done.statusCode, 303);
  const shown = await owner.browser.get(String(done.headers.location));
  t.match(noticeOf(shown.body), 'its keys act as the new holder');
  t.equal(await holderOf(appId), developer.username, 'the new account holder');
  t.match(await roles(appId), {
    [developer.username]: 'owner',
    [holder.username]: 'admin',
    [owner.username]: 'owner',
  });

  const me = await api(app, 'GET', '/api/v1/me', key);
  t.equal(me.body.data.username, developer.username, 'the key acts as the new holder at once');
  const feed = await api(app, 'GET', '/api/v1/listings', key);
  t.notOk(
    feed.body.data.some((l: { id: string }) => l.id === before.body.data.id),
    'the sandbox listings made so far stay with the previous holder',
  );
  const after = await api(app, 'POST', '/api/v1/listings', key, listingBody({ title: 'New' }));
  t.equal(after.status, 201);
  const [seller] = await queryRows<{ username: string }>(
    app.db,
    sql`select u.username from listings l join users u on u.id = l.seller_id
        where l.id = ${after.body.data.id}`,
  );
  t.equal(seller?.username, developer.username, 'what the key writes is the new holder’s');

  t.match(await lastAudit(appId), {
    action: 'app.ownership_transferred',
    actor: { type: 'user', name: owner.username },
    target: developer.username,
    details: { from: holder.username, to: developer.username, previous_role: 'admin' },
  });
});

t.test('a transfer is announced to every server’s credential cache', async (t) => {
  const { appId } = await teamApp();
  const key = await createKeyInPortal(holder, appId);
  await api(app, 'GET', '/api/v1/me', key);
  await keyChangeHeard(app, () =>
    adminCli(app, 'app transfer', { app: appId, username: admin.username }),
  );
  t.equal((await api(app, 'GET', '/api/v1/me', key)).body.data.username, admin.username);
});

t.test('refused: not an owner (403), not a member, the holder, forged CSRF', async (t) => {
  const urls = await teamApp();
  const { appId } = urls;
  const before = await state(appId);
  for (const by of [admin, developer]) {
    const res = await by.browser.post(urls.transfer, {
      csrf_token: /name="csrf_token" value="([^"]+)"/.exec(
        (await by.browser.get(`/portal/apps/${appId}`)).body,
      )![1]!,
      username: by.username,
      confirm: by.username,
    });
    t.equal(res.statusCode, 403, `${by.username}: a non-owner is refused`);
  }
  const outsiderRes = await transferInPortal(owner, urls, { username: outsider.username });
  t.equal(outsiderRes.statusCode, 409, 'a user who is not a member');
  t.match(alertOf(outsiderRes.body), 'is not a member of this app');
  const self = await transferInPortal(owner, urls, { username: holder.username });
  t.equal(self.statusCode, 409, 'the present holder');
  const nobody = await transferInPortal(owner, urls, { username: 'no_such_user' });
  t.equal(nobody.statusCode, 400, 'an unknown username');
  for (const token of [undefined, 'forged']) {
    const form = { username: admin.username, confirm: admin.username };
    const res = await owner.browser.post(
      urls.transfer,
      token ? { ...form, csrf_token: token } : form,
    );
    t.equal(res.statusCode, 403, `${token ?? 'without a token'}: 403`);
  }
  await t.rejects(
    adminCli(app, 'app transfer', { app: appId, username: outsider.username }),
    { message: `${outsider.username} is not a member of this app` },
    'the CLI refuses a non-member too',
  );
  t.equal(await state(appId), before, 'nothing changed, nothing in the audit log');
});

t.test('the CLI transfers; the holder and last-owner rules hold afterwards', async (t: Test) => {
  const { appId } = await teamApp();
  const result = await adminCli(app, 'app transfer', {
    app: appId,
    username: admin.username,
    'previous-role': 'viewer',
  });
  t.same(result, {
    id: appId,
    account_holder: admin.username,
    previous: { username: holder.username, role: 'viewer' },
  });
  t.match(await roles(appId), { [admin.username]: 'owner', [holder.username]: 'viewer' });
  t.match(await lastAudit(appId), {
    action: 'app.ownership_transferred',
    actor: { type: 'admin_cli' },
    target: admin.username,
    details: { from: holder.username, to: admin.username, previous_role: 'viewer' },
  });
  await t.rejects(
    adminCli(app, 'app member add', { app: appId, username: admin.username, role: 'admin' }),
    { message: /stays an owner: .* until an owner transfers the account/ },
    'the new holder stays an owner',
  );
  await app.services.apps.removeMember(appId, owner.username, 'admin_cli');
  t.match(
    await adminCli(app, 'app member remove', { app: appId, username: holder.username }),
    { removed: true },
    'the previous holder can now be removed',
  );
  t.same(
    (await app.services.apps.members(appId))
      .filter((m) => m.role === 'owner')
      .map((m) => m.username),
    [admin.username],
    'one owner left: the holder',
  );
  const back = await adminCli(app, 'app transfer', { app: appId, username: developer.username });
  t.match(back, { previous: { username: admin.username, role: 'owner' } }, 'default: owner');
});
