/**
 * Members and roles (issue #61, docs/portal.md "Members and roles"): every cell of the table of
 * role x action, through the portal's pages and forms, each allowed one changing what it says
 * and each refused one answering 403 with the app's state unchanged; the account holder and
 * last-owner rules; and a member removed mid-session refused on their very next request.
 */
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { APP_ACTIONS, APP_ROLES, mayDo, type AppAction, type AppRole } from '../../src/access.ts';
import type { AuditAction } from '../../src/audit/audit-service.ts';
import { COMMANDS } from '../../src/cli/admin.ts';
import { queryRows } from '../../src/db/rows.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, startReceiver } from '../webhooks/support.ts';
import { appWithLog, createApp, signUp, type PortalUser } from './support.ts';

const { app } = await appWithLog(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const receiver = await startReceiver(t);
receiver.reply = () => ({ status: 200 });

const holder = await signUp(app);
const users: Record<AppRole, PortalUser> = {
  owner: await signUp(app),
  admin: await signUp(app),
  developer: await signUp(app),
  viewer: await signUp(app),
};
/** A service call's refusal status ('done' when it was not refused). */
const refused = (work: Promise<unknown>) =>
  work.then(
    () => 'done',
    (err: { statusCode?: number }) => err.statusCode,
  );
const page = (appId: string, rest = '') => `/portal/apps/${appId}${rest}`;

/** Everything of the app a form may change, as one text: equal before and after a refusal. */
async function state(appId: string): Promise<string> {
  const rows = await Promise.all(
    [
      sql`select name, owner_id, deleted_at, production_requested_at from apps where id = ${appId}`,
      sql`select id, name, revoked_at, expires_at from api_keys where app_id = ${appId} order by id`,
      sql`select uri from app_redirect_uris where app_id = ${appId} order by uri`,
      sql`select id, revoked_at from app_client_secrets where app_id = ${appId} order by id`,
      sql`select id, url, active, secret, enabled_events, deleted_at from webhook_endpoints
          where app_id = ${appId} order by id`,
      sql`select d.id, d.status, d.attempts from webhook_deliveries d
          join webhook_endpoints e on e.id = d.endpoint_id where e.app_id = ${appId} order by d.id`,
      sql`select id from saved_searches where app_id = ${appId} order by id`,
      sql`select user_id, role from app_members where app_id = ${appId} order by user_id`,
      sql`select id, action from audit_events where app_id = ${appId} order by id`,
    ].map((query) => queryRows(app.db, query)),
  );
  return JSON.stringify(rows);
}

/**
 * A fresh app of the holder with the four others as members, live keys unlocked; deleted when
 * the test ends (the holder may have 25 apps at a time).
 */
async function teamApp(t: Test): Promise<string> {
  const appId = await createApp(holder);
  t.teardown(async () => {
    const { name } = await app.services.apps.get(appId).catch(() => ({ name: null }));
    if (name !== null) await app.services.apps.delete(appId, name);
  });
  for (const role of APP_ROLES)
    await app.services.apps.addMember(appId, { username: users[role].username, role }, 'admin_cli');
  await app.services.apps.completeMilestone(appId, 'sandbox_listing');
  await app.services.apps.approve(appId);
  return appId;
}

/** What a cell sets up (as the holder, through the services) and then asks of the member. */
interface Cell {
  action: AppAction;
  what: string;
  /** Run by the member; returns the answer's status. */
  run: (user: PortalUser, appId: string, made: Record<string, string>) => Promise<number>;
  /** Made before, by the holder: ids the form acts on. */
  setup?: (appId: string) => Promise<Record<string, string>>;
  /** The status of an allowed run (a refused one is 403). */
  ok: number;
  /** The audit log's entry of an allowed run (none: not a change the log records). */
  audit?: AuditAction;
}

const view = (rest: string, action: AppAction): Cell => ({
  action,
  what: `GET ${rest || '(overview)'}`,
  ok: 200,
  run: async (user, appId) => (await user.browser.get(page(appId, rest))).statusCode,
});

/** Posts a form from the overview (every member sees it, with its CSRF token). */
const post = (
  user: PortalUser,
  appId: string,
  rest: string,
  form: Record<string, string | string[]> = {},
) => user.browser.act(page(appId), page(appId, rest), form).then((res) => res.statusCode);

const key = async (appId: string, env: 'sandbox' | 'live') =>
  (await app.services.keys.create({ appId, env, scopes: ['read', 'searches'] })).id;
let endpoints = 0;
const endpoint = async (appId: string, env: 'sandbox' | 'live') =>
  (
    await app.services.endpoints.create({
      appId,
      env,
      url: receiver.url(`/e${(endpoints += 1)}`),
    })
  ).id;

const cells: Cell[] = [
  view('', 'app.view'),
  view('/keys', 'app.view'),
  view('/oauth', 'app.view'),
  view('/webhooks', 'app.view'),
  view('/events', 'events.view'),
  view('/saved-searches', 'saved_searches.view'),
  view('/logs', 'logs.view'),
  view('/inventory', 'inventory.view'),
  view('/settings', 'app.rename'),
  view('/audit', 'audit.view'),
  view('/members', 'members.view'),
  ...(['sandbox', 'live'] as const).flatMap((env): Cell[] => {
    const action = env === 'live' ? 'live.credentials' : 'sandbox.credentials';
    return [
      {
        action,
        what: `create a ${env} key`,
        ok: 201,
        audit: 'key.created',
        run: (u, appId) => post(u, appId, '/keys', { env, scopes: ['read'], name: 'K' }),
      },
      {
        action,
        what: `rename a ${env} key`,
        ok: 303,
        audit: 'key.renamed',
        setup: async (appId) => ({ key: await key(appId, env) }),
        run: (u, appId, m) => post(u, appId, `/keys/${m.key}/name`, { name: 'Renamed' }),
      },
      {
        action,
        what: `roll a ${env} key`,
        ok: 201,
        audit: 'key.rolled',
        setup: async (appId) => ({ key: await key(appId, env) }),
        run: (u, appId, m) => post(u, appId, `/keys/${m.key}/roll`, { expires_in: '1h' }),
      },
      {
        action,
        what: `revoke a ${env} key`,
        ok: 303,
        audit: 'key.revoked',
        setup: async (appId) => ({ key: await key(appId, env) }),
        run: (u, appId, m) => post(u, appId, '/keys/revoke', { key_id: m.key! }),
      },
      {
        action,
        what: `create a ${env} endpoint`,
        ok: 201,
        audit: 'endpoint.created',
        run: (u, appId) =>
          post(u, appId, '/webhooks', { env, url: receiver.url(`/n${++endpoints}`) }),
      },
      ...(
        [
          ['edit', 303, 'endpoint.updated'],
          ['ping', 303, undefined],
          ['secret', 201, 'endpoint.secret_rotated'],
          ['disable', 303, 'endpoint.disabled'],
          ['delete', 303, 'endpoint.deleted'],
        ] as const
      ).map(([form, ok, audit]): Cell => ({
        action,
        what: `${form} a ${env} endpoint`,
        ok,
        ...(audit ? { audit } : {}),
        setup: async (appId) => ({ endpoint: await endpoint(appId, env) }),
        run: (u, appId, m) =>
          post(u, appId, `/webhooks/${m.endpoint}/${form}`, {
            ...(form === 'edit' ? { url: receiver.url(`/n${++endpoints}`) } : {}),
          }),
      })),
      {
        action,
        what: `enable a ${env} endpoint`,
        ok: 303,
        audit: 'endpoint.enabled',
        setup: async (appId) => {
          const id = await endpoint(appId, env);
          await app.services.endpoints.disable(id, { appId });
          return { endpoint: id };
        },
        run: (u, appId, m) => post(u, appId, `/webhooks/${m.endpoint}/enable`),
      },
    ];
  }),
  {
    action: 'sandbox.credentials',
    what: 'send a test event to a sandbox endpoint',
    ok: 303,
    setup: async (appId) => ({ endpoint: await endpoint(appId, 'sandbox') }),
    run: (u, appId, m) =>
      post(u, appId, `/webhooks/${m.endpoint}/test-event`, { type: 'listing.created' }),
  },
  {
    action: 'events.redeliver',
    what: 'redeliver a delivery',
    ok: 303,
    setup: async (appId) => {
      const id = await endpoint(appId, 'sandbox');
      const { delivery_id } = await app.services.endpoints.ping(id, { appId });
      await waitUntil('the ping delivered', async () => {
        const [row] = await queryRows<{ status: string }>(
          app.db,
          sql`select status from webhook_deliveries where id = ${delivery_id}`,
        );
        return row?.status === 'succeeded';
      });
      return { endpoint: id, delivery: delivery_id };
    },
    run: (u, appId, m) =>
      post(u, appId, `/webhooks/${m.endpoint}/redeliver`, { delivery_id: m.delivery! }),
  },
  {
    action: 'saved_searches.delete',
    what: 'delete a saved search',
    ok: 303,
    audit: 'saved_search.deleted',
    setup: async (appId) => {
      const secret = await app.services.keys.create({
        appId,
        env: 'sandbox',
        scopes: ['searches'],
      });
      const res = await api(app, 'POST', '/api/v1/saved_searches', secret.key, {
        name: 'Coats',
        q: 'coat',
      });
      if (res.status !== 201) throw new Error(`saved search: ${res.status}`);
      return { search: String(res.body.data.id) };
    },
    run: (u, appId, m) =>
      post(u, appId, '/saved-searches/delete', { saved_search_id: m.search!, env: 'sandbox' }),
  },
  {
    action: 'oauth.manage',
    what: 'add a redirect URI',
    ok: 303,
    audit: 'redirect_uri.added',
    run: (u, appId) => post(u, appId, '/oauth/redirect-uris', { uri: 'https://example.com/cb' }),
  },
  {
    action: 'oauth.manage',
    what: 'remove a redirect URI',
    ok: 303,
    audit: 'redirect_uri.removed',
    setup: async (appId) => {
      await app.services.apps.addRedirectUri(appId, 'https://example.com/old');
      return {};
    },
    run: (u, appId) =>
      post(u, appId, '/oauth/redirect-uris/remove', { uri: 'https://example.com/old' }),
  },
  {
    action: 'oauth.manage',
    what: 'create the OAuth client secret',
    ok: 201,
    audit: 'client_secret.rotated',
    run: (u, appId) => post(u, appId, '/oauth/secret', { confirm: 'rotate' }),
  },
  {
    action: 'app.rename',
    what: 'rename the app',
    ok: 303,
    audit: 'app.renamed',
    run: (u, appId) => post(u, appId, '/settings/name', { name: 'Renamed app' }),
  },
  {
    action: 'production.request',
    what: 'request production approval',
    ok: 303,
    audit: 'production.requested',
    setup: async (appId) => {
      // Approved apps cannot ask; a fresh one with its milestone done can.
      await app.db.execute(sql`update apps set production_approved = false where id = ${appId}`);
      return {};
    },
    run: (u, appId) => post(u, appId, '/production-request'),
  },
  {
    action: 'app.transfer',
    what: "transfer the app's account",
    ok: 303,
    audit: 'app.ownership_transferred',
    run: (u, appId) => {
      const to = users.viewer.username;
      return post(u, appId, '/settings/transfer', { username: to, confirm: to });
    },
  },
  {
    action: 'app.delete',
    what: 'delete the app',
    ok: 303,
    audit: 'app.deleted',
    run: async (u, appId) => {
      const { name } = await app.services.apps.get(appId);
      return post(u, appId, '/settings/delete', { confirm: name });
    },
  },
];

t.test('every action of the table has a cell here', async (t) => {
  const covered = new Set(cells.map((c) => c.action));
  for (const action of Object.keys(APP_ACTIONS) as AppAction[])
    if (!action.startsWith('members.') && action !== 'owners.manage')
      t.ok(covered.has(action), `${action} is tried`);
});

for (const cell of cells) {
  t.test(`${cell.what}: ${APP_ACTIONS[cell.action]} and above`, async (t) => {
    const appId = await teamApp(t);
    for (const role of [...APP_ROLES].reverse()) {
      const made = (await cell.setup?.(appId)) ?? {};
      const before = await state(appId);
      const status = await cell.run(users[role], appId, made);
      if (mayDo(role, cell.action)) {
        t.equal(status, cell.ok, `${role}: allowed`);
        const [entry] = await queryRows<{ action: string; actor_name: string; ip: string }>(
          app.db,
          sql`select action, actor_name, ip from audit_events where app_id = ${appId}
              order by id desc limit 1`,
        );
        if (cell.audit)
          t.match(
            entry,
            { action: cell.audit, actor_name: users[role].username, ip: /\d/ },
            `${role}: in the audit log as theirs`,
          );
        if (cell.action === 'app.delete') t.not(await state(appId), before, `${role}: deleted`);
      } else {
        t.equal(status, 403, `${role}: refused`);
        t.equal(await state(appId), before, `${role}: nothing changed`);
      }
    }
  });
}

t.test('members: admins manage all but owners; owners manage owners', async (t) => {
  const appId = await teamApp(t);
  const extra = await signUp(app);
  const actor = async (role: AppRole) => ({
    userId: (await app.services.users.getByUsername(users[role].username)).id,
    role,
  });
  for (const role of ['viewer', 'developer'] as const) {
    const before = await state(appId);
    t.equal(
      await refused(
        app.services.apps.addMember(
          appId,
          { username: extra.username, role: 'viewer' },
          await actor(role),
        ),
      ),
      403,
      `${role} cannot add a member`,
    );
    t.equal(await state(appId), before, 'nothing changed');
  }
  const added = await app.services.apps.addMember(
    appId,
    { username: extra.username, role: 'developer' },
    await actor('admin'),
  );
  t.match(added, { username: extra.username, role: 'developer', added_by: users.admin.username });
  t.equal(
    await refused(
      app.services.apps.setMemberRole(
        appId,
        { username: extra.username, role: 'owner' },
        await actor('admin'),
      ),
    ),
    403,
    'an admin cannot make an owner',
  );
  t.equal(
    await refused(
      app.services.apps.removeMember(appId, users.owner.username, await actor('admin')),
    ),
    403,
    'an admin cannot remove an owner',
  );
  t.match(
    await app.services.apps.setMemberRole(
      appId,
      { username: extra.username, role: 'owner' },
      await actor('owner'),
    ),
    { role: 'owner' },
    'an owner makes an owner',
  );
  t.equal(
    await refused(
      app.services.apps.addMember(
        appId,
        { username: extra.username, role: 'viewer' },
        await actor('owner'),
      ),
    ),
    409,
    'a member twice is refused',
  );
  t.equal(
    await refused(
      app.services.apps.setMemberRole(
        appId,
        { username: extra.username, role: 'boss' },
        await actor('owner'),
      ),
    ),
    400,
    'an unknown role is refused',
  );
  t.same(
    await app.services.apps.removeMember(appId, users.viewer.username, await actor('viewer')),
    { username: users.viewer.username, removed: true },
    'anyone may leave',
  );
});

t.test('the account holder stays an owner, so an app always has one', async (t) => {
  const appId = await createApp(holder);
  const holderActor = {
    userId: (await app.services.users.getByUsername(holder.username)).id,
    role: 'owner' as const,
  };
  const before = await state(appId);
  await t.rejects(
    app.services.apps.setMemberRole(
      appId,
      { username: holder.username, role: 'admin' },
      holderActor,
    ),
    { statusCode: 409, message: /stays an owner/ },
    'the last owner cannot step down',
  );
  t.equal(
    await refused(app.services.apps.removeMember(appId, holder.username, holderActor)),
    409,
    'nor leave',
  );
  await app.services.apps.addMember(
    appId,
    { username: users.owner.username, role: 'owner' },
    'admin_cli',
  );
  const other = {
    userId: (await app.services.users.getByUsername(users.owner.username)).id,
    role: 'owner' as const,
  };
  t.equal(
    await refused(app.services.apps.removeMember(appId, holder.username, other)),
    409,
    'another owner cannot remove the account holder either',
  );
  await app.services.apps.removeMember(appId, users.owner.username, 'admin_cli');
  t.equal(await state(appId), before, 'only the added owner came and went');
});

t.test('a removed member is refused on their next request, page or form', async (t) => {
  const appId = await teamApp(t);
  const dev = users.developer;
  t.equal((await dev.browser.get(page(appId, '/keys'))).statusCode, 200, 'a member sees it');
  await app.services.apps.removeMember(appId, dev.username, 'admin_cli');
  const before = await state(appId);
  t.equal((await dev.browser.get(page(appId, '/keys'))).statusCode, 404, 'the next page: 404');
  // A form from the page they still had open (the token of their session is still valid).
  const res = await dev.browser.submit(
    { env: 'sandbox', scopes: ['read'], name: 'After' },
    page(appId, '/keys'),
  );
  t.equal(res.statusCode, 404, 'the next form: 404');
  t.equal(await state(appId), before, 'nothing changed');
  const list = await dev.browser.get('/portal/apps');
  t.notMatch(list.body, appId, 'nor is it among their apps');
});

t.test('admin app member list|add|remove', async (t) => {
  const appId = await createApp(holder);
  const run = (command: string, flags: Record<string, string>) =>
    COMMANDS[command]!.run(app.services, new Map(Object.entries(flags).map(([k, v]) => [k, [v]])));
  t.match(
    await run('app member add', { app: appId, username: users.viewer.username, role: 'viewer' }),
    {
      username: users.viewer.username,
      role: 'viewer',
      added_by: null,
    },
  );
  t.match(
    await run('app member add', { app: appId, username: users.viewer.username, role: 'admin' }),
    { role: 'admin' },
    'add again changes the role',
  );
  const listed = (await run('app member list', { app: appId })) as {
    members: { username: string; role: string; account_holder: boolean }[];
  };
  t.same(
    listed.members.map((m) => [m.username, m.role, m.account_holder]),
    [
      [holder.username, 'owner', true],
      [users.viewer.username, 'admin', false],
    ],
  );
  t.same(await run('app member remove', { app: appId, username: users.viewer.username }), {
    username: users.viewer.username,
    removed: true,
  });
  t.equal(await refused(run('app member remove', { app: appId, username: holder.username })), 409);
});

t.test('the pages offer what the role may do', async (t) => {
  const appId = await teamApp(t);
  const settingsTab = `href="${page(appId, '/settings')}"`;
  const overview = await users.viewer.browser.get(page(appId));
  t.match(overview.body, /<dt>Your role<\/dt><dd>viewer<\/dd>/);
  t.notMatch(overview.body, settingsTab, 'no Settings tab for a viewer');
  t.match((await users.admin.browser.get(page(appId))).body, settingsTab, 'an admin has it');
  const settings = await users.admin.browser.get(page(appId, '/settings'));
  t.match(settings.body, /Rename app/);
  t.notMatch(settings.body, /Delete app/, 'deleting is an owner’s');
  t.match((await users.owner.browser.get(page(appId, '/settings'))).body, /Delete app/);
});
