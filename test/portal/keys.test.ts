/**
 * Named keys and key rolling (docs/portal.md): a key is named at creation and renamed later;
 * rolling it shows a replacement once (same name, environment and scopes) and the old key keeps
 * working until the expiry chosen, then answers 401 exactly like a revoked key. The CLI's
 * `key rename` and `key roll` are the same service calls, with the same words. Expiry is moved
 * into the past in the database to check "and not after" without waiting an hour.
 */
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { COMMANDS } from '../../src/cli/admin.ts';
import { queryRows } from '../../src/db/rows.ts';
import { Browser } from '../helpers/browser.ts';
import { keyChangeHeard } from '../helpers/accounts.ts';
import { alertOf, appWithLog, createApp, noticeOf, shownSecret, signUp } from './support.ts';

const { app, log } = await appWithLog(t);
const user = await signUp(app);
const appId = await createApp(user, 'Rolling app');
const keysUrl = `/portal/apps/${appId}/keys`;

const me = (app: FastifyInstance, key: string) =>
  app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${key}` } });

async function createKey(name?: string): Promise<{ id: string; key: string; page: string }> {
  const res = await user.browser.act(keysUrl, keysUrl, {
    env: 'sandbox',
    scopes: ['read', 'listings:write'],
    ...(name === undefined ? {} : { name }),
  });
  const key = shownSecret(res.body, 'new-key');
  // The list is oldest first: the new key is the last one.
  const id = [
    ...res.body.matchAll(/href="\/portal\/apps\/[0-9a-f-]{36}\/keys\/([0-9a-f-]{36})"/g),
  ].at(-1)?.[1];
  if (res.statusCode !== 201 || !key || !id)
    throw new Error(`key creation failed: ${res.statusCode} ${alertOf(res.body)}`);
  return { id, key, page: res.body };
}

async function roll(keyId: string, expiresIn: string) {
  const url = `${keysUrl}/${keyId}`;
  return user.browser.act(url, `${url}/roll`, { expires_in: expiresIn });
}

const revokedAnswer = async () => {
  const revoked = await createKey('To revoke');
  await user.browser.act(keysUrl, `${keysUrl}/revoke`, { key_id: revoked.id });
  return me(app, revoked.key);
};

t.test('a key is named at creation; an empty name is refused in words for people', async (t) => {
  const named = await createKey('Shop sync');
  t.match(named.page, /Your new sandbox key: Shop sync/);
  const list = await user.browser.get(keysUrl);
  t.match(list.body, new RegExp(`>Shop sync</a>`), 'the list shows the name');

  const blank = await user.browser.act(keysUrl, keysUrl, {
    env: 'sandbox',
    scopes: ['read'],
    name: '   ',
  });
  t.equal(blank.statusCode, 400);
  t.equal(alertOf(blank.body), 'Give the key a name.');
  t.notOk(shownSecret(blank.body, 'new-key'), 'no key was made');

  const long = await user.browser.act(keysUrl, keysUrl, {
    env: 'sandbox',
    scopes: ['read'],
    name: 'x'.repeat(101),
  });
  t.equal(long.statusCode, 400);
  t.equal(alertOf(long.body), 'Keep the name to 100 characters or fewer.');
});

t.test('a key is renamed on its page; the CLI renames with the same service', async (t) => {
  const { id } = await createKey('Old name');
  const url = `${keysUrl}/${id}`;
  const renamed = await user.browser.act(url, `${url}/name`, { name: '  Catalogue import  ' });
  t.equal(renamed.statusCode, 303);
  const page = await user.browser.get(String(renamed.headers.location));
  t.equal(noticeOf(page.body), 'The key was renamed.');
  t.match(page.body, /<h2 id="key-heading">Catalogue import<\/h2>/, 'trimmed and shown');

  const empty = await user.browser.act(url, `${url}/name`, { name: '' });
  t.equal(empty.statusCode, 400);
  t.equal(alertOf(empty.body), 'Give the key a name.');

  const cli = await COMMANDS['key rename']!.run(
    app.services,
    new Map([
      ['id', [id]],
      ['name', ['From the CLI']],
    ]),
  );
  t.same(cli, { id, name: 'From the CLI' });
  t.match((await user.browser.get(url)).body, /From the CLI/);
  await t.rejects(
    COMMANDS['key rename']!.run(
      app.services,
      new Map([
        ['id', [id]],
        ['name', [' ']],
      ]),
    ),
    { message: 'Give the key a name.' },
    'the CLI refuses with the same words',
  );
});

t.test(
  'a rolled key works until its expiry and not after; the replacement keeps working',
  async (t) => {
    const old = await createKey('Nightly sync');
    t.equal((await me(app, old.key)).statusCode, 200);

    const rolled = await roll(old.id, '1h');
    t.equal(rolled.statusCode, 201);
    const replacement = shownSecret(rolled.body, 'new-key')!;
    t.ok(replacement?.startsWith('svc_sandbox_'), 'the replacement is shown once');
    t.not(replacement, old.key);
    t.match(rolled.body, /Your new sandbox key: Nightly sync/, 'same name');
    t.match(rolled.body, /keeps working until <time datetime="/);

    const [row] = await queryRows<{ expires_at: string | Date; scopes: string[] }>(
      app.db,
      sql`select expires_at, scopes from api_keys where id = ${old.id}`,
    );
    const inAnHour = Date.now() + 3_600_000;
    t.ok(Math.abs(new Date(row!.expires_at).getTime() - inAnHour) < 60_000, 'expires in 1 hour');

    t.equal((await me(app, old.key)).statusCode, 200, 'the old key works during the overlap');
    t.equal((await me(app, replacement)).statusCode, 200, 'the replacement works');
    const listed = (await user.browser.get(keysUrl)).body;
    t.match(listed, /Rolled:<\/strong> works until <time/, 'the list shows the expiry');

    await keyChangeHeard(app, () =>
      app.db.execute(
        sql`update api_keys set expires_at = now() - interval '1 second' where id = ${old.id}`,
      ),
    );
    const expired = await me(app, old.key);
    const revoked = await revokedAnswer();
    t.equal(expired.statusCode, 401, 'after its expiry the old key answers 401');
    t.same(
      { ...expired.json().error, request_id: undefined },
      { ...revoked.json().error, request_id: undefined },
      'exactly like a revoked key',
    );
    t.equal((await me(app, replacement)).statusCode, 200, 'the replacement still works');
    t.match((await user.browser.get(keysUrl)).body, /Expired <time/);

    const scopes = await queryRows<{ scopes: string[] }>(
      app.db,
      sql`select scopes from api_keys where name = 'Nightly sync' order by created_at`,
    );
    t.same(
      scopes.map((r) => r.scopes),
      [row!.scopes, row!.scopes],
      'the replacement has the same scopes',
    );
  },
);

t.test(
  'roll "now" stops the old key at once; a rolled, expired or revoked key cannot be rolled',
  async (t) => {
    const old = await createKey('Leaked key');
    const rolled = await roll(old.id, 'now');
    t.equal(rolled.statusCode, 201);
    t.equal((await me(app, old.key)).statusCode, 401, 'stopped at once');
    const replacement = shownSecret(rolled.body, 'new-key')!;
    t.equal((await me(app, replacement)).statusCode, 200);

    const again = await roll(old.id, '1h');
    t.equal(again.statusCode, 409);
    t.equal(
      alertOf(again.body),
      'This key no longer works, so it cannot be rolled. Create a new key.',
    );

    const other = await createKey('Rolled once');
    await roll(other.id, '7d');
    const twice = await roll(other.id, '24h');
    t.equal(twice.statusCode, 409);
    t.equal(alertOf(twice.body), 'This key was already rolled; roll its replacement instead.');

    const bad = await roll((await createKey('Bad choice')).id, '2h');
    t.equal(bad.statusCode, 400);
    t.equal(alertOf(bad.body), 'Choose when the old key stops: now, 1h, 24h or 7d.');

    const cli = (await COMMANDS['key roll']!.run(
      app.services,
      new Map([
        ['id', [other.id]],
        ['expires-in', ['24h']],
      ]),
    ).catch((err: Error) => err)) as Error;
    t.equal(cli.message, 'This key was already rolled; roll its replacement instead.', 'CLI words');
  },
);

t.test(
  'the CLI rolls a key: the replacement once, and the old key until replaced.expires_at',
  async (t) => {
    const created = (await COMMANDS['key create']!.run(
      app.services,
      new Map([
        ['app', [appId]],
        ['env', ['sandbox']],
      ]),
    )) as { id: string; key: string };
    const [named] = await queryRows<{ name: string }>(
      app.db,
      sql`select name from api_keys where id = ${created.id}`,
    );
    t.equal(named?.name, 'Sandbox key', 'the CLI names a key by default');
    const rolled = (await COMMANDS['key roll']!.run(
      app.services,
      new Map([
        ['id', [created.id]],
        ['expires-in', ['24h']],
      ]),
    )) as { id: string; key: string; name: string; replaced: { id: string; expires_at: string } };
    t.equal(rolled.name, 'Sandbox key');
    t.equal(rolled.replaced.id, created.id);
    const in24h = Date.now() + 86_400_000;
    t.ok(Math.abs(new Date(rolled.replaced.expires_at).getTime() - in24h) < 60_000);
    t.equal((await me(app, created.key)).statusCode, 200);
    t.equal((await me(app, rolled.key)).statusCode, 200);
  },
);

t.test("another user's key page and roll are not found", async (t) => {
  const { id } = await createKey('Mine');
  const stranger = await signUp(app);
  const strangerApp = await createApp(stranger);
  const page = await stranger.browser.get(`/portal/apps/${strangerApp}/keys/${id}`);
  t.equal(page.statusCode, 404);
  const ownPage = await stranger.browser.get(`/portal/apps/${strangerApp}/keys`);
  t.equal(ownPage.statusCode, 200);
  const res = await stranger.browser.submit(
    { expires_in: 'now' },
    `/portal/apps/${strangerApp}/keys/${id}/roll`,
  );
  t.equal(res.statusCode, 404);
});

t.test('no key appears in a URL or a log line', async (t) => {
  const lines = log();
  for (const match of (await user.browser.get(keysUrl)).body.matchAll(/svc_sandbox_[\w-]{32,}/g))
    t.fail(`a key on the list page: ${match[0]}`);
  t.notMatch(lines, /svc_sandbox_[A-Za-z0-9_-]{32,}/, 'no key in the log');
  t.notOk(
    Browser.urls.some((url) => /svc_sandbox_/.test(url)),
    'no key in a URL or Location',
  );
});
