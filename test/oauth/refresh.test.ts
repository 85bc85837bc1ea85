/**
 * Refresh tokens under concurrency and at their limits (OpenAPI `/oauth/token`): a refresh token
 * whose rotation is in progress answers invalid_grant without revoking anything (a client's own
 * race); after the rotation committed, it is reuse and revokes the grant; several refreshes at
 * once with one token give exactly one new pair. Idle expiry and the grant's lifetime cap are
 * judged by the database clock. The lock test needs a second connection: PostgreSQL only.
 */
import { eq, sql } from 'drizzle-orm';
import t from 'tap';
import { oauthGrants, oauthTokens } from '../../src/db/schema.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { createClient, createEndUser, exchange, obtainCode, tokenRequest } from './support.ts';

const app = await buildTestApp(t);
const client = await createClient(app);
const user = await createEndUser(app);
const onPostgres = Boolean(process.env.DATABASE_URL && process.env.DATABASE_URL !== 'memory://');

async function authorize(): Promise<{ access_token: string; refresh_token: string }> {
  const res = await exchange(
    app,
    client,
    await obtainCode(new Browser(app), client, user, { scope: 'read listings:write' }),
  );
  return JSON.parse(res.body);
}
const refresh = (refreshToken: string) =>
  tokenRequest(app, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.clientId,
    client_secret: client.clientSecret,
  });
const userinfo = (token: string) =>
  app.inject({
    method: 'GET',
    url: '/oauth/userinfo',
    headers: { authorization: `Bearer ${token}` },
  });

t.test(
  'a refresh whose token is being rotated right now: invalid_grant, nothing revoked',
  { skip: !onPostgres && 'needs two connections (PostgreSQL)' },
  async (t) => {
    const tokens = await authorize();
    // Another transaction holds the refresh token's row, as a rotation in progress does.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = app.db.transaction(async (tx) => {
      await tx.execute(
        sql`select id from oauth_tokens where token_hash = ${hashSecret(tokens.refresh_token)} for update`,
      );
      locked();
      await held;
    });
    await isLocked;
    const during = await refresh(tokens.refresh_token);
    t.equal(during.statusCode, 400);
    t.match(
      JSON.parse(during.body),
      { error: 'invalid_grant', error_description: /another request/ },
      'told that another request uses it',
    );
    release();
    await holder;
    t.equal((await userinfo(tokens.access_token)).statusCode, 200, 'nothing was revoked');
    const after = await refresh(tokens.refresh_token);
    t.equal(
      after.statusCode,
      200,
      'once the other request ended (without rotating), the token refreshes',
    );
  },
);

t.test('five refreshes at once with one refresh token: exactly one new pair', async (t) => {
  const tokens = await authorize();
  const answers = await Promise.all(Array.from({ length: 5 }, () => refresh(tokens.refresh_token)));
  const ok = answers.filter((r) => r.statusCode === 200);
  t.equal(ok.length, 1, 'one 200');
  t.ok(
    answers
      .filter((r) => r.statusCode !== 200)
      .every((r) => JSON.parse(r.body).error === 'invalid_grant'),
    'the others invalid_grant',
  );
  const rows = await app.db
    .select({ n: sql<number>`count(*)::int` })
    .from(oauthTokens)
    .innerJoin(oauthGrants, eq(oauthGrants.id, oauthTokens.grantId))
    .where(eq(oauthTokens.kind, 'refresh'));
  t.ok(rows[0]!.n >= 2, 'the rotated token and the new one are stored (hashed)');
});

t.test('idle expiry and the lifetime cap, on the database clock', async (t) => {
  const idle = await authorize();
  await app.db
    .update(oauthTokens)
    .set({ expiresAt: sql`now() - interval '1 second'` })
    .where(eq(oauthTokens.tokenHash, hashSecret(idle.refresh_token)));
  t.match(
    JSON.parse((await refresh(idle.refresh_token)).body),
    { error: 'invalid_grant', error_description: /expired/ },
    'an expired refresh token',
  );

  const fresh = await authorize();
  const [issued] = await app.db
    .select({
      expiresAt: oauthTokens.expiresAt,
      days: sql<number>`round(extract(epoch from ${oauthTokens.expiresAt} - now()) / 86400)::int`,
    })
    .from(oauthTokens)
    .where(eq(oauthTokens.tokenHash, hashSecret(fresh.refresh_token)));
  t.equal(issued!.days, 90, 'a new refresh token is good for 90 days');
  // The user consented 364 days ago: the next refresh token ends at the one-year mark, not in 90
  // days.
  const [grant] = await app.db
    .select({ grantId: oauthTokens.grantId })
    .from(oauthTokens)
    .where(eq(oauthTokens.tokenHash, hashSecret(fresh.refresh_token)));
  await app.db
    .update(oauthGrants)
    .set({ createdAt: sql`now() - interval '364 days'` })
    .where(eq(oauthGrants.id, grant!.grantId));
  const next = JSON.parse((await refresh(fresh.refresh_token)).body);
  const [capped] = await app.db
    .select({
      hours: sql<number>`round(extract(epoch from ${oauthTokens.expiresAt} - now()) / 3600)::int`,
    })
    .from(oauthTokens)
    .where(eq(oauthTokens.tokenHash, hashSecret(next.refresh_token)));
  t.equal(capped!.hours, 24, 'capped at one year after consent');
});

t.test('a refresh token is no bearer credential', async (t) => {
  const tokens = await authorize();
  t.equal((await userinfo(tokens.refresh_token)).statusCode, 401);
  const row = await app.db
    .select()
    .from(oauthTokens)
    .where(eq(oauthTokens.tokenHash, hashSecret(tokens.refresh_token)));
  t.equal(row.length, 1, 'stored by its digest');
  t.notOk(
    JSON.stringify(await app.db.select().from(oauthTokens)).includes(tokens.refresh_token),
    'never in clear',
  );
});
