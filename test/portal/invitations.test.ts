/**
 * Invitations and the Members page (issue #61, docs/portal.md "Members and roles"): an admin
 * invites by username with a role; the invitee accepts or declines on their Apps page, which
 * lists the apps they own and those they are a member of, with the role; an invitation expires
 * after 7 days and can be revoked, and then accepting it is refused and changes nothing; roles
 * are changed and members removed (or leave) on the Members page, under the rules of the role
 * table; every new form refuses a post without its CSRF token.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { alertOf, appWithLog, createApp, noticeOf, signUp, type PortalUser } from './support.ts';

const { app } = await appWithLog(t);
const holder = await signUp(app);
const appId = await createApp(holder, 'Team app');
const membersUrl = `/portal/apps/${appId}/members`;

const roleOf = async (user: PortalUser) => {
  const [row] = await queryRows<{ role: string }>(
    app.db,
    sql`select m.role from app_members m join users u on u.id = m.user_id
        where m.app_id = ${appId} and u.username = ${user.username}`,
  );
  return row?.role;
};
const openInvitations = async () =>
  queryRows<{ id: string; username: string; role: string }>(
    app.db,
    sql`select i.id, u.username, i.role from app_invitations i join users u on u.id = i.user_id
        where i.app_id = ${appId} and i.resolution is null order by i.created_at`,
  );
const invitationOf = async (user: PortalUser) =>
  (await openInvitations()).find((i) => i.username === user.username)!.id;
const invite = (by: PortalUser, user: PortalUser | string, role: string) =>
  by.browser.act(membersUrl, `${membersUrl}/invite`, {
    username: typeof user === 'string' ? user : user.username,
    role,
  });
const answer = async (user: PortalUser, id: string, to: 'accept' | 'decline') => {
  await user.browser.get('/portal/apps');
  return user.browser.submit({}, `/portal/invitations/${id}/${to}`);
};

const admin = await signUp(app);
await app.services.apps.addMember(appId, { username: admin.username, role: 'admin' }, 'admin_cli');

t.test('an admin invites; the invitee accepts on their Apps page and has the role', async (t) => {
  const dev = await signUp(app);
  const sent = await invite(admin, dev, 'developer');
  t.equal(sent.statusCode, 303);
  t.equal(sent.headers.location, `${membersUrl}?done=invited`);
  const page = await admin.browser.get(membersUrl);
  t.match(page.body, new RegExp(`<td>@${dev.username}</td>\\n<td>developer</td>`), 'listed open');
  t.equal(await roleOf(dev), undefined, 'not a member yet');
  t.equal((await dev.browser.get(`/portal/apps/${appId}`)).statusCode, 404, 'nor sees the app');

  const apps = await dev.browser.get('/portal/apps');
  t.match(apps.body, /<strong>Team app<\/strong> as <strong>developer<\/strong>/);
  t.match(apps.body, new RegExp(`from @${admin.username}`));
  const accepted = await answer(dev, await invitationOf(dev), 'accept');
  t.equal(accepted.statusCode, 303);
  t.equal(accepted.headers.location, `/portal/apps/${appId}?done=accepted`);
  t.equal(await roleOf(dev), 'developer');
  const overview = await dev.browser.get(`/portal/apps/${appId}`);
  t.equal(overview.statusCode, 200);
  t.match(noticeOf((await dev.browser.get(`/portal/apps/${appId}?done=accepted`)).body), /team/);

  // Their Apps page: their own app as owner, the team's as developer.
  const own = await createApp(dev, 'Own app');
  const list = (await dev.browser.get('/portal/apps')).body;
  t.match(list, new RegExp(`<a href="/portal/apps/${own}">Own app</a></td>\\n<td>owner</td>`));
  t.match(
    list,
    new RegExp(`<a href="/portal/apps/${appId}">Team app</a></td>\\n<td>developer</td>`),
  );
  t.notMatch(list, /Invitations/, 'no open invitation left');
  const members = (await app.services.apps.members(appId)).find((m) => m.username === dev.username);
  t.equal(members?.added_by, admin.username, 'added by the one who invited');
});

t.test('declining leaves them out', async (t) => {
  const user = await signUp(app);
  await invite(admin, user, 'viewer');
  const declined = await answer(user, await invitationOf(user), 'decline');
  t.equal(declined.headers.location, '/portal/apps?done=declined');
  t.equal(await roleOf(user), undefined);
  t.equal((await openInvitations()).filter((i) => i.username === user.username).length, 0);
});

t.test('an expired or revoked invitation cannot be accepted, and changes nothing', async (t) => {
  const late = await signUp(app);
  await invite(admin, late, 'developer');
  const lateId = await invitationOf(late);
  await app.db.execute(
    sql`update app_invitations set expires_at = now() - interval '1 second' where id = ${lateId}`,
  );
  t.notMatch((await late.browser.get('/portal/apps')).body, /Team app/, 'not shown once expired');
  const refused = await late.browser.post(`/portal/invitations/${lateId}/accept`, {
    csrf_token: /name="csrf_token" value="([^"]+)"/.exec(
      (await late.browser.get('/portal/apps')).body,
    )![1]!,
  });
  t.equal(refused.statusCode, 409);
  t.match(alertOf(refused.body), /no longer open/);
  t.equal(await roleOf(late), undefined, 'not a member');
  t.equal(
    (await invite(admin, late, 'viewer')).statusCode,
    303,
    'an expired invitation does not stop a new one',
  );

  const revokedUser = await signUp(app);
  await invite(admin, revokedUser, 'developer');
  const id = await invitationOf(revokedUser);
  const revoked = await admin.browser.act(membersUrl, `${membersUrl}/revoke-invitation`, {
    invitation_id: id,
  });
  t.equal(revoked.headers.location, `${membersUrl}?done=revoked`);
  const after = await answer(revokedUser, id, 'accept');
  t.equal(after.statusCode, 409);
  t.equal(await roleOf(revokedUser), undefined, 'not a member');

  const stranger = await signUp(app);
  const notTheirs = await answer(stranger, await invitationOf(late), 'accept');
  t.equal(notTheirs.statusCode, 404, "another user's invitation is not found");
  t.equal(await roleOf(stranger), undefined);
});

t.test('refusals: who may invite whom; twice; unknown users', async (t) => {
  const dev = await signUp(app);
  await app.services.apps.addMember(
    appId,
    { username: dev.username, role: 'developer' },
    'admin_cli',
  );
  const target = await signUp(app);
  const before = await openInvitations();
  const byDev = await invite(dev, target, 'viewer');
  t.equal(byDev.statusCode, 403, 'a developer cannot invite');
  const ownerByAdmin = await invite(admin, target, 'owner');
  t.equal(ownerByAdmin.statusCode, 403, 'an admin cannot invite an owner');
  t.match(alertOf(ownerByAdmin.body), /needs owner/);
  t.same(await openInvitations(), before, 'nothing was sent');
  t.equal((await invite(holder, target, 'owner')).statusCode, 303, 'an owner invites an owner');
  t.equal((await invite(holder, target, 'viewer')).statusCode, 409, 'invited already');
  t.equal((await invite(holder, dev, 'viewer')).statusCode, 409, 'a member already');
  const nobody = await invite(holder, 'no_such_user', 'viewer');
  t.equal(nobody.statusCode, 400);
  t.equal(alertOf(nobody.body), 'No user named no_such_user.');
  t.match(nobody.body, /value="no_such_user"/, 'the form keeps what was typed');
  t.equal((await invite(holder, target.username, 'boss')).statusCode, 400, 'an unknown role');
});

t.test('roles changed and members removed on the Members page; anyone may leave', async (t) => {
  const user = await signUp(app);
  await app.services.apps.addMember(
    appId,
    { username: user.username, role: 'viewer' },
    'admin_cli',
  );
  const page = (await user.browser.get(membersUrl)).body;
  t.notMatch(page, /Send invitation/, 'a viewer is not offered the invite form');
  t.notMatch(page, /Change role/, 'nor role changes');
  t.match(page, /Leave this app/);
  const byViewer = await user.browser.act(membersUrl, `${membersUrl}/role`, {
    username: user.username,
    role: 'admin',
  });
  t.equal(byViewer.statusCode, 403, 'a viewer cannot promote themselves');
  t.equal(await roleOf(user), 'viewer');

  const changed = await admin.browser.act(membersUrl, `${membersUrl}/role`, {
    username: user.username,
    role: 'developer',
  });
  t.equal(changed.headers.location, `${membersUrl}?done=changed`);
  t.equal(await roleOf(user), 'developer');
  const holderRow = await admin.browser.act(membersUrl, `${membersUrl}/remove`, {
    username: holder.username,
  });
  t.equal(holderRow.statusCode, 403, 'an admin cannot remove an owner');
  const removedByDev = await user.browser.act(membersUrl, `${membersUrl}/remove`, {
    username: admin.username,
  });
  t.equal(removedByDev.statusCode, 403, 'a developer cannot remove others');
  t.equal(await roleOf(admin), 'admin');

  const left = await user.browser.act(membersUrl, `${membersUrl}/remove`, {
    username: user.username,
  });
  t.equal(left.headers.location, '/portal/apps?done=left');
  t.equal(await roleOf(user), undefined);
  t.equal((await user.browser.get(membersUrl)).statusCode, 404, 'gone at once');

  const holderLeaves = await holder.browser.act(membersUrl, `${membersUrl}/remove`, {
    username: holder.username,
  });
  t.equal(holderLeaves.statusCode, 409, 'the account holder cannot leave');
  t.equal(await roleOf(holder), 'owner');
});

t.test('every new form refuses a post without its CSRF token, changing nothing', async (t) => {
  const user = await signUp(app);
  await invite(holder, user, 'viewer');
  const id = await invitationOf(user);
  const state = async () =>
    JSON.stringify([
      await openInvitations(),
      await queryRows(app.db, sql`select user_id, role from app_members where app_id = ${appId}`),
    ]);
  const before = await state();
  const forms: [PortalUser, string, Record<string, string>][] = [
    [holder, `${membersUrl}/invite`, { username: admin.username, role: 'viewer' }],
    [holder, `${membersUrl}/role`, { username: admin.username, role: 'viewer' }],
    [holder, `${membersUrl}/remove`, { username: admin.username }],
    [holder, `${membersUrl}/revoke-invitation`, { invitation_id: id }],
    [user, `/portal/invitations/${id}/accept`, {}],
    [user, `/portal/invitations/${id}/decline`, {}],
  ];
  for (const [by, url, form] of forms) {
    for (const token of [undefined, 'forged']) {
      const res = await by.browser.post(url, token ? { ...form, csrf_token: token } : form);
      t.equal(res.statusCode, 403, `${url} ${token ?? 'without a token'}: 403`);
    }
  }
  t.equal(await state(), before, 'nothing changed');
});
