/**
 * Sign-in history (issue #61, docs/portal.md "Accounts"): every sign-in to an existing account
 * is kept with its time, client IP, user agent and outcome (signed in, wrong password, refused
 * by the sign-in limits), and the account page (/account/apps) shows the account's own last
 * ones, newest first, and nobody else's.
 */
import t from 'tap';
import { Browser } from '../helpers/browser.ts';
import { appWithLog, signUp } from '../portal/support.ts';

const { app } = await appWithLog(t);
const user = await signUp(app);
const other = await signUp(app);

const signIn = async (browser: Browser, username: string, password: string) => {
  await browser.get('/login');
  return browser.submit({ username, password }, '/login');
};
const rows = (html: string) =>
  [
    ...html.matchAll(
      /<tr>\n<td><time datetime="[^"]+">[^<]+<\/time><\/td>\n<td>([^<]+)<\/td>\n<td>([^<]*)<\/td>\n<td>([^<]*)<\/td>/g,
    ),
  ].map((m) => [m[1], m[2], m[3]]);

t.test('sign-ins are listed with IP, user agent and outcome, newest first', async (t) => {
  const laptop = new Browser(app);
  t.equal((await signIn(laptop, user.username, 'not the password')).statusCode, 401);
  t.equal((await signIn(laptop, user.username, user.password)).statusCode, 303);

  const page = await laptop.get('/account/apps');
  t.equal(page.statusCode, 200);
  t.match(page.body, /<h2 id="sign-ins-heading">Recent sign-ins<\/h2>/);
  t.same(rows(page.body), [
    ['Signed in', laptop.remoteAddress, 'lightMyRequest'],
    ['Wrong password', laptop.remoteAddress, 'lightMyRequest'],
  ]);
  t.same(rows((await other.browser.get('/account/apps')).body), [], "not another user's");
});

t.test('a sign-in refused by the limits is listed as refused', async (t) => {
  const attacker = new Browser(app);
  for (let i = 0; i < 5; i += 1)
    t.equal((await signIn(attacker, other.username, `guess ${i}`)).statusCode, 401);
  t.equal((await signIn(attacker, other.username, other.password)).statusCode, 429);
  const listed = rows((await other.browser.get('/account/apps')).body);
  t.same(listed[0], ['Refused: too many attempts', attacker.remoteAddress, 'lightMyRequest']);
  t.equal(listed.filter(([outcome]) => outcome === 'Wrong password').length, 5);
  t.equal(
    rows((await signIn(new Browser(app), 'no_such_user', 'x y z w')).body).length,
    0,
    'an unknown username has no history',
  );
});
