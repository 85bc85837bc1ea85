/**
 * Unpublished listings need listings:write (OpenAPI "Unpublished listings need
 * `listings:write`", docs/oauth.md "Scopes"): the owner view (seller=me) answers 403
 * insufficient_scope to a key or token granted only `read` (a sandbox key's feed then shows its
 * owner's active sandbox listings only), and such a credential
 * reads its own draft or archived listing by id as anyone else does (404). The same credentials
 * with listings:write see them. OAuth tokens come from the real consent page, which names drafts
 * and archived listings under listings:write.
 */
import t from 'tap';
import { createKey } from '../helpers/accounts.ts';
import { Browser, unescapeHtml } from '../helpers/browser.ts';
import { listingBody } from '../helpers/listings.ts';
import {
  authorizePath,
  createClient,
  createEndUser,
  exchange,
  obtainCode,
} from '../oauth/support.ts';
import {
  call,
  createSeller,
  expectError,
  expectOk,
  listingsApp,
  PHOTO,
  type Answer,
  type Asserts,
  type Json,
} from './support.ts';

const app = await listingsApp(t);

const CHALLENGE = /^Bearer realm="api", error="insufficient_scope", scope="listings:write"$/;

/** Draft, active and archived listings of one credential, created through the API. */
async function inventory(key: string): Promise<Record<'draft' | 'active' | 'archived', string>> {
  const make = async (status: 'draft' | 'active') => {
    const res = await call(app, 'POST', '/api/v1/listings', {
      key,
      body: listingBody({ status, cover_image_url: PHOTO }),
    });
    if (res.status !== 201) throw new Error(`setup: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id as string;
  };
  const draft = await make('draft');
  const active = await make('active');
  const archived = await make('draft');
  if ((await call(app, 'DELETE', `/api/v1/listings/${archived}`, { key })).status !== 200)
    throw new Error('setup: archive');
  return { draft, active, archived };
}

function expectInsufficientScope(t: Asserts, res: Answer): void {
  const error = expectError(t, res, 403, 'forbidden');
  t.match(error?.message, /listings:write/, 'the message names the scope');
  t.match(String(res.headers['www-authenticate']), CHALLENGE, 'RFC 6750 insufficient_scope');
}

const ids = (res: Answer): string[] => (res.body?.data ?? []).map((l: Json) => l.id);

t.test('OAuth tokens: read only gets 403 on seller=me and 404 on its drafts', async (t) => {
  const client = await createClient(app);
  const user = await createEndUser(app);
  const browser = new Browser(app);

  // The consent page says what listings:write covers, in the user's words.
  await browser.signIn(
    authorizePath({
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: client.redirectUri,
      scope: 'read listings:write',
      state: 's',
    }),
    user,
  );
  t.match(
    unescapeHtml(browser.page),
    /<li>Create, edit and archive listings in your name on the live marketplace, and see your drafts and archived listings\.<\/li>/,
    'the consent page names drafts and archived listings under listings:write',
  );

  const token = async (scope: string) =>
    (await exchange(app, client, await obtainCode(browser, client, user, { scope }))).json()
      .access_token as string;
  const writer = await token('read listings:write');
  const reader = await token('read');
  const own = await inventory(writer);

  const full = await call(app, 'GET', '/api/v1/listings?seller=me&limit=100', { key: writer });
  expectOk(t, full, 200, 'live');
  t.strictSame(
    new Set(ids(full)),
    new Set(Object.values(own)),
    'a listings:write token sees its drafts and archived listings',
  );
  expectOk(t, await call(app, 'GET', `/api/v1/listings/${own.draft}`, { key: writer }), 200);

  expectInsufficientScope(t, await call(app, 'GET', '/api/v1/listings?seller=me', { key: reader }));
  expectInsufficientScope(
    t,
    await call(app, 'GET', '/api/v1/listings?seller=me&status=draft&sort=updated_at', {
      key: reader,
    }),
  );
  const etag = String(full.headers.etag);
  expectInsufficientScope(
    t,
    await call(app, 'GET', '/api/v1/listings?seller=me&limit=100', {
      key: reader,
      headers: { 'if-none-match': etag },
    }),
  );
  for (const status of ['draft', 'archived'] as const)
    expectError(
      t,
      await call(app, 'GET', `/api/v1/listings/${own[status]}`, { key: reader }),
      404,
      'not_found',
    );
  const active = await call(app, 'GET', `/api/v1/listings/${own.active}`, { key: reader });
  expectOk(t, active, 200);
  const feed = await call(app, 'GET', '/api/v1/listings?limit=100', { key: reader });
  t.ok(ids(feed).includes(own.active), 'the public feed still shows its active listing');
  t.notOk(ids(feed).includes(own.draft), 'and no draft');
});

t.test('API keys: the same rule, in both environments', async (t) => {
  const seller = await createSeller(app);
  const liveReader = await createKey(app, seller, 'live', 'read');
  const sandboxReader = await createKey(app, seller, 'sandbox', 'read');
  const live = await inventory(seller.live);
  const sandbox = await inventory(seller.sandbox);

  const full = await call(app, 'GET', '/api/v1/listings?seller=me&limit=100', {
    key: seller.live,
  });
  t.strictSame(new Set(ids(full)), new Set(Object.values(live)), 'listings:write: every status');
  expectInsufficientScope(
    t,
    await call(app, 'GET', '/api/v1/listings?seller=me', { key: liveReader }),
  );
  expectError(
    t,
    await call(app, 'GET', `/api/v1/listings/${live.draft}`, { key: liveReader }),
    404,
    'not_found',
  );

  // A sandbox key's feed is its owner's view of the sandbox: listings:write, as seller=me.
  const sandboxFeed = await call(app, 'GET', '/api/v1/listings?limit=100', {
    key: seller.sandbox,
  });
  expectOk(t, sandboxFeed, 200, 'sandbox');
  t.strictSame(new Set(ids(sandboxFeed)), new Set(Object.values(sandbox)), 'every status');
  // Without it, the spec's sandbox feed still answers (every sandbox key has one): the owner's
  // active sandbox listings only, on the plain feed and its searches; seller=me is refused.
  for (const url of ['/api/v1/listings?limit=100', '/api/v1/listings?sort=price_asc&limit=100']) {
    const readerFeed = await call(app, 'GET', url, { key: sandboxReader });
    expectOk(t, readerFeed, 200, 'sandbox');
    t.strictSame(ids(readerFeed), [sandbox.active], `${url}: the active listing only`);
  }
  expectInsufficientScope(
    t,
    await call(app, 'GET', '/api/v1/listings?seller=me', { key: sandboxReader }),
  );
  expectOk(
    t,
    await call(app, 'GET', `/api/v1/listings/${sandbox.active}`, { key: sandboxReader }),
    200,
  );
  for (const status of ['draft', 'archived'] as const)
    expectError(
      t,
      await call(app, 'GET', `/api/v1/listings/${sandbox[status]}`, { key: sandboxReader }),
      404,
      'not_found',
    );

  // Anonymous seller=me is still 401, before any scope question.
  expectError(t, await call(app, 'GET', '/api/v1/listings?seller=me'), 401, 'unauthorized');
});
