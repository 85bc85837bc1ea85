/**
 * The audit log (issue #61, docs/portal.md "Audit log"): the members' changes, invitations and
 * the admin CLI's changes are recorded with their actor, IP and user agent; the portal's page
 * shows them newest first, filtered by actor and action, in keyset pages, as `admin app audit`
 * does; a refused change records nothing; no entry holds a secret. (Each portal action's own
 * entry is asserted cell by cell in members.test.ts.)
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { adminCli, appWithLog, createApp, createKeyInPortal, signUp } from './support.ts';

const { app } = await appWithLog(t);
const owner = await signUp(app);
const appId = await createApp(owner, 'Audited app');
const auditUrl = `/portal/apps/${appId}/audit`;
const cli = (command: string, flags: Record<string, string>) => adminCli(app, command, flags);

const viewer = await signUp(app);
const shown: string[] = [];

t.test('members, invitations and the CLI are recorded with their actor', async (t) => {
  await cli('app member add', { app: appId, username: viewer.username, role: 'viewer' });
  const invitee = await signUp(app);
  const membersUrl = `/portal/apps/${appId}/members`;
  await owner.browser.act(membersUrl, `${membersUrl}/invite`, {
    username: invitee.username,
    role: 'developer',
  });
  const refused = await viewer.browser.act(`/portal/apps/${appId}`, `${membersUrl}/invite`, {
    username: invitee.username,
    role: 'admin',
  });
  t.equal(refused.statusCode, 403);
  shown.push(await createKeyInPortal(owner, appId));
  const secret = (await cli('app secret', { app: appId })) as { client_secret: string };
  shown.push(secret.client_secret);

  const page = (await cli('app audit', { app: appId })) as {
    entries: { action: string; actor: { type: string; name: string | null }; ip: string | null }[];
  };
  t.same(
    page.entries.map((e) => [e.action, e.actor.type, e.actor.name]),
    [
      ['client_secret.rotated', 'admin_cli', null],
      ['key.created', 'user', owner.username],
      ['invitation.sent', 'user', owner.username],
      ['member.added', 'admin_cli', null],
    ],
    'newest first; the refused invitation is not there',
  );
  t.match(page.entries[1], { ip: /\d/, user_agent: 'lightMyRequest' }, 'from where');
  t.match(page.entries[0], { ip: null, user_agent: null }, 'the CLI has no address');
});

t.test('the page: newest first, filtered by actor and action, keyset pages', async (t) => {
  for (let i = 0; i < 3; i += 1) await cli('app rename', { app: appId, name: `Audited ${i}` });
  const all = await owner.browser.get(auditUrl);
  t.equal(all.statusCode, 200);
  const actions = [...all.body.matchAll(/<td><code>([a-z_.]+)<\/code><\/td>/g)].map((m) => m[1]);
  t.same(actions.slice(0, 4), [
    'app.renamed',
    'app.renamed',
    'app.renamed',
    'client_secret.rotated',
  ]);
  // What changed, as stored (jsonb orders the keys its own way).
  t.match(all.body, /&quot;to&quot;:&quot;Audited 2&quot;,&quot;from&quot;:&quot;Audited 1&quot;/);

  const byOwner = await owner.browser.get(`${auditUrl}?actor=${owner.username}`);
  const ownerActions = [...byOwner.body.matchAll(/<td><code>([a-z_.]+)<\/code><\/td>/g)].map(
    (m) => m[1],
  );
  t.same(ownerActions, ['key.created', 'invitation.sent']);
  const cliRenames = await owner.browser.get(`${auditUrl}?actor=admin_cli&action=app.renamed`);
  t.equal([...cliRenames.body.matchAll(/<code>app\.renamed<\/code>/g)].length, 3);

  const first = (await cli('app audit', { app: appId, limit: '2' })) as {
    entries: { id: string }[];
    next_cursor: string;
  };
  t.equal(first.entries.length, 2);
  const second = (await cli('app audit', {
    app: appId,
    limit: '2',
    cursor: first.next_cursor,
  })) as { entries: { id: string }[] };
  t.ok(second.entries[0]!.id < first.entries[1]!.id, 'the next page is older');
  t.equal(
    (await owner.browser.get(`${auditUrl}?cursor=nonsense`)).statusCode,
    400,
    'a made-up cursor is a 400 page',
  );
  t.equal((await owner.browser.get(`${auditUrl}?action=nope`)).statusCode, 400);
  t.equal((await viewer.browser.get(auditUrl)).statusCode, 403, 'a viewer cannot read it');
});

t.test('no entry holds a secret', async (t) => {
  const rows = await queryRows<{ text: string }>(
    app.db,
    sql`select row_to_json(a)::text as text from audit_events a where app_id = ${appId}`,
  );
  t.equal(rows.length, 7);
  for (const row of rows) {
    t.notMatch(row.text, /svc_/, 'no credential of any kind');
    for (const secret of shown) t.notOk(row.text.includes(secret));
  }
});
