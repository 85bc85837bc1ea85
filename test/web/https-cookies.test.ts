/**
 * Under an https BASE_URL every cookie the server sets is `__Host-` prefixed and `Secure`,
 * `HttpOnly`, `SameSite=Lax`, `Path=/`, without a `Domain` (the prefix's rules: a browser refuses
 * such a cookie from plain http or from a sibling subdomain). Read from the Set-Cookie headers of
 * a real sign-in on a server built with that BASE_URL, and the cookies then carry the session.
 */
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { createEndUser } from '../oauth/support.ts';

/** Set-Cookie headers as name -> attributes (lowercased, value dropped). */
function setCookies(header: string | string[] | undefined): Map<string, string[]> {
  const cookies = new Map<string, string[]>();
  for (const line of header === undefined ? [] : [header].flat()) {
    const [pair, ...attributes] = line.split(';').map((part) => part.trim());
    cookies.set(
      pair!.slice(0, pair!.indexOf('=')),
      attributes.map((a) => a.toLowerCase()),
    );
  }
  return cookies;
}

t.test('an https BASE_URL: __Host- cookies, Secure, HttpOnly, SameSite=Lax', async (t) => {
  const app = await buildTestApp(t, { BASE_URL: 'https://market.example.com' });
  const user = await createEndUser(app);
  const browser = new Browser(app);
  const form = await browser.get('/login');
  t.equal(form.statusCode, 200);
  const signedIn = await browser.submit({ username: user.username, password: user.password });
  t.equal(signedIn.statusCode, 303, 'signed in');
  const set = new Map([
    ...setCookies(form.headers['set-cookie']),
    ...setCookies(signedIn.headers['set-cookie']),
  ]);
  t.ok(set.size >= 2, `cookies set: ${[...set.keys()].join(', ')}`);
  t.ok(set.has('__Host-svc_session'), 'the session cookie');
  for (const [name, attributes] of set) {
    t.match(name, /^__Host-/, `${name}: __Host- prefixed`);
    t.ok(attributes.includes('secure'), `${name}: Secure`);
    t.ok(attributes.includes('httponly'), `${name}: HttpOnly`);
    t.ok(attributes.includes('samesite=lax'), `${name}: SameSite=Lax`);
    t.ok(attributes.includes('path=/'), `${name}: Path=/`);
    t.notOk(
      attributes.some((a) => a.startsWith('domain=')),
      `${name}: no Domain`,
    );
  }
  const account = await browser.get('/account/apps');
  t.equal(account.statusCode, 200, 'the __Host- session cookie carries the session');
});

t.test('a plain http BASE_URL (local development): no prefix, not Secure', async (t) => {
  const app = await buildTestApp(t, { BASE_URL: 'http://127.0.0.1:3000' });
  const user = await createEndUser(app);
  const browser = new Browser(app);
  await browser.get('/login');
  const signedIn = await browser.submit({ username: user.username, password: user.password });
  const set = setCookies(signedIn.headers['set-cookie']);
  t.ok(set.has('svc_session'), 'svc_session');
  t.notOk(set.get('svc_session')!.includes('secure'), 'not Secure: the browser would drop it');
});
