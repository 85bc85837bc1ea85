/**
 * The pages' form posts check the Origin header beside the CSRF token (docs/portal.md): a post
 * whose Origin is another site's is 403 even with a valid token, and changes nothing; this
 * site's origin (BASE_URL's), or no Origin at all, is decided by the token as before. Every page
 * form: the portal's signed-in forms, sign-up, sign-in and the OAuth consent share one check.
 */
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { createApp, signUp } from '../portal/support.ts';

const BASE_URL = 'https://portal.example.com';
const app = await buildTestApp(t, { BASE_URL });
const owner = await signUp(app);
const appId = await createApp(owner, 'Origin app');
const keys = `/portal/apps/${appId}/keys`;
const keyCount = async () => (await app.services.keys.list(appId)).length;

t.test('a foreign Origin: 403 with a valid CSRF token, nothing changed', async (t) => {
  const before = await keyCount();
  for (const origin of ['https://evil.example', 'null', 'http://portal.example.com']) {
    owner.browser.origin = origin;
    const res = await owner.browser.act(keys, keys, { env: 'sandbox', scopes: ['read'] });
    t.equal(res.statusCode, 403, `${origin}: 403`);
    t.match(res.body, /another site/, `${origin}: says why`);
    t.match(
      res.body,
      /Open the page at https:\/\/portal\.example\.com \(this site/,
      `${origin}: and where to open it`,
    );
  }
  t.equal(await keyCount(), before, 'no key was made');

  const stranger = new Browser(app);
  stranger.origin = 'https://evil.example';
  await stranger.get('/login');
  const signIn = await stranger.submit({ username: owner.username, password: owner.password });
  t.equal(signIn.statusCode, 403, 'the sign-in form too');
});

t.test("this site's Origin, or none: the token decides, as before", async (t) => {
  const before = await keyCount();
  for (const origin of [BASE_URL, undefined]) {
    owner.browser.origin = origin;
    const res = await owner.browser.act(keys, keys, { env: 'sandbox', scopes: ['read'] });
    t.equal(res.statusCode, 201, `${origin ?? 'no Origin'}: the key is made`);
  }
  t.equal(await keyCount(), before + 2);
});
