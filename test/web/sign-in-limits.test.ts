// Sign-in limits (docs/configuration.md, the document's "Sign-in limits"): one
// setting, RATE_LIMIT_SIGNIN_MAX, limits the sign-in attempts of an IP on every sign-in form;
// the consent decision is not an attempt; failures refuse one (client, username) pair, so a
// guesser cannot lock the owner out from elsewhere, and the much higher per-username limit
// never applies to a browser where the owner signed in before.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { rateHeaders } from '../hardening/support.ts';
import { Browser } from '../helpers/browser.ts';
import { authorizePath, createClient, createEndUser } from '../oauth/support.ts';

const app = await buildTestApp(t, {
  RATE_LIMIT_SIGNIN_MAX: '12',
  RATE_LIMIT_SIGNIN_USERNAME_FAILURES: '8',
});
const client = await createClient(app);
const authorize = authorizePath({
  response_type: 'code',
  client_id: client.clientId,
  redirect_uri: client.redirectUri,
  state: 'st',
});

let ipSerial = 0;
const freshIp = () => `192.0.2.${(ipSerial += 1)}`;

/**
 * One sign-in from `browser` (by default a new one at `ip`), on /login or the authorization page.
 */
async function signIn(
  ip: string,
  username: string,
  password: string,
  browser = new Browser(app, ip),
  page = '/login',
) {
  await browser.get(page);
  return browser.submit({ username, password });
}

t.test(
  'RATE_LIMIT_SIGNIN_MAX alone limits the sign-in attempts of an IP, on /login and /oauth/authorize',
  async (t) => {
    const user = await createEndUser(app);
    const ip = freshIp();
    const statuses: number[] = [];
    for (let i = 0; i < 12; i += 1) {
      const res = await signIn(
        ip,
        user.username,
        user.password,
        undefined,
        i % 2 ? '/login' : authorize,
      );
      statuses.push(res.statusCode);
      t.equal(rateHeaders(res.headers).limit, 12, `attempt ${i + 1}: the sign-in row`);
    }
    t.strictSame(
      statuses,
      Array(12).fill(303),
      'twelve sign-ins from one IP within a minute (more than 10)',
    );
    const refused = await signIn(ip, user.username, user.password);
    t.equal(refused.statusCode, 429, 'the thirteenth: 429');
    t.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After');
    t.equal(
      (await signIn(freshIp(), user.username, user.password)).statusCode,
      303,
      'another IP is not limited',
    );
  },
);

t.test('consent decisions are not sign-in attempts', async (t) => {
  const user = await createEndUser(app);
  const ip = freshIp();
  const browser = new Browser(app, ip);
  await browser.signIn(authorize, user);
  for (let i = 0; i < 14; i += 1) {
    await browser.get(authorize);
    const decision = i % 2 ? 'deny' : 'allow';
    const res = await browser.submit({ decision });
    t.equal(res.statusCode, 303, `decision ${i + 1} (${decision}) is answered`);
    t.match(
      String(res.headers.location),
      decision === 'allow' ? /[?&]code=svc_ac_/ : /[?&]error=access_denied/,
    );
    t.equal(
      rateHeaders(res.headers).limit,
      300,
      'counted under the pages row, not the sign-in row',
    );
  }
  const again = await signIn(ip, user.username, user.password);
  t.equal(again.statusCode, 303, 'fourteen decisions later, the IP still signs in');
  t.equal(rateHeaders(again.headers).remaining, 10, 'its second sign-in attempt');
});

t.test(
  "a guesser's failures refuse that IP for that username, never the owner elsewhere",
  async (t) => {
    const victim = await createEndUser(app);
    const attacker = freshIp();
    for (let i = 0; i < 5; i += 1)
      t.equal(
        (await signIn(attacker, victim.username, `wrong ${i}`)).statusCode,
        401,
        `failure ${i + 1}`,
      );
    const refused = await signIn(attacker, victim.username, victim.password);
    t.equal(
      refused.statusCode,
      429,
      "the guesser's IP is refused for that username, even with the right password",
    );
    const retryAfter = Number(refused.headers['retry-after']);
    t.ok(
      retryAfter > 60 && retryAfter <= 900,
      `until its 15-minute window ends (Retry-After ${retryAfter})`,
    );
    t.match(refused.body, /Too many sign-in attempts/);
    t.equal(
      (await signIn(freshIp(), victim.username, victim.password)).statusCode,
      303,
      'the owner signs in from another IP',
    );
    const bystander = await createEndUser(app);
    t.equal(
      (await signIn(attacker, bystander.username, bystander.password)).statusCode,
      303,
      "that IP's other usernames are not refused",
    );

    // A name that does not exist is counted the same way: nothing tells the two apart.
    for (let i = 0; i < 5; i += 1)
      t.equal((await signIn(attacker, 'ghost_name', `guess ${i}`)).statusCode, 401);
    t.equal(
      (await signIn(attacker, 'ghost_name', 'guess again')).statusCode,
      429,
      'unknown username: also 429',
    );
    t.equal(
      (await signIn(freshIp(), 'ghost_name', 'guess again')).statusCode,
      401,
      'and only from that IP',
    );

    // A success clears the failures of its IP for that username (3 + 3 would be over 5).
    const typo = await createEndUser(app);
    const ip = freshIp();
    for (let i = 0; i < 3; i += 1) await signIn(ip, typo.username, `typo ${i}`);
    t.equal((await signIn(ip, typo.username, typo.password)).statusCode, 303);
    const after: number[] = [];
    for (let i = 0; i < 3; i += 1)
      after.push((await signIn(ip, typo.username, `typo again ${i}`)).statusCode);
    t.strictSame(after, [401, 401, 401], 'counted afresh after the success');
  },
);

t.test(
  'guessers on many networks: the username is refused, except in browsers where its owner signed in before',
  async (t) => {
    const owner = await createEndUser(app);
    const home = new Browser(app, freshIp());
    t.equal(
      (await signIn(home.remoteAddress, owner.username, owner.password, home)).statusCode,
      303,
    );
    t.ok(home.cookies.get('svc_device'), 'the browser is marked as known for this username');

    // RATE_LIMIT_SIGNIN_USERNAME_FAILURES=8 failures, from two networks, under 5 each.
    const failures: number[] = [];
    for (const ip of [freshIp(), freshIp()])
      for (let i = 0; i < 4; i += 1)
        failures.push((await signIn(ip, owner.username, `guess ${i}`)).statusCode);
    t.strictSame(failures, Array(8).fill(401));
    const stranger = await signIn(freshIp(), owner.username, owner.password);
    t.equal(
      stranger.statusCode,
      429,
      'a new browser on a new network is refused for that username',
    );
    t.ok(
      Number(stranger.headers['retry-after']) > 15 * 60,
      'until the hour of the username counter ends',
    );

    // The owner's browser, on yet another network (a phone that moved): not refused.
    const travelling = new Browser(app, freshIp());
    for (const name of ['svc_browser', 'svc_device'])
      travelling.cookies.set(name, home.cookies.get(name)!);
    t.equal(
      (await signIn(travelling.remoteAddress, owner.username, owner.password, travelling))
        .statusCode,
      303,
      'the known browser signs in',
    );

    // The mark belongs to its browser and its username: copied elsewhere, or for another name, it
    // does not count.
    const copied = new Browser(app, freshIp());
    copied.cookies.set('svc_device', home.cookies.get('svc_device')!);
    t.equal(
      (await signIn(copied.remoteAddress, owner.username, owner.password, copied)).statusCode,
      429,
      'the mark without its browser id',
    );
  },
);
