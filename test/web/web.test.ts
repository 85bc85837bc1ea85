// The page helpers on their own (no app, no database): escaping, CSRF tokens, the failed
// sign-in counters (in memory) and return_to checks. The cookies under an https BASE_URL are in
// https-cookies.test.ts, read from a real sign-in.
import t from 'tap';
import { ResilientStore } from '../../src/lib/rate-limit-store.ts';
import { Csrf } from '../../src/web/csrf.ts';
import { safeReturnTo } from '../../src/web/forms.ts';
import { html, pageHeaders, SafeHtml } from '../../src/web/html.ts';
import { LoginThrottle, type SignInClient } from '../../src/web/login-throttle.ts';
import { sleep } from '../helpers/wait.ts';

t.test('html escapes every interpolated value', async (t) => {
  const evil = `"><script>alert('x')</script>&`;
  const out = html`<p title="${evil}">${evil}</p>`.value;
  t.equal(
    out,
    '<p title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;</p>',
  );
  t.equal(
    html`<ul>${['<a>', html`<li>ok</li>`]}</ul>`.value,
    '<ul>&lt;a&gt;<li>ok</li></ul>',
    'arrays: text escaped, SafeHtml kept',
  );
  t.equal(html`${null}${undefined}${false}${0}`.value, '0', 'nothing for null, undefined, false');
  t.ok(html`x` instanceof SafeHtml);
});

t.test('page headers forbid framing and scripts', async (t) => {
  const headers = pageHeaders(['https://client.example.com']);
  t.match(headers['content-security-policy'], /frame-ancestors 'none'/);
  t.match(headers['content-security-policy'], /default-src 'none'/);
  t.match(headers['content-security-policy'], /form-action 'self' https:\/\/client\.example\.com/);
  t.equal(headers['x-frame-options'], 'DENY');
  t.equal(headers['referrer-policy'], 'same-origin');
});

t.test('CSRF tokens: bound to their binding and to the secret', async (t) => {
  const csrf = new Csrf('s'.repeat(32));
  const token = csrf.token('browser|session');
  t.ok(csrf.verify('browser|session', token));
  t.notOk(csrf.verify('browser|', token), 'another binding (signed out)');
  t.notOk(csrf.verify('other|session', token), 'another browser');
  t.notOk(new Csrf('t'.repeat(32)).verify('browser|session', token), 'another secret');
  t.notOk(csrf.verify('browser|session', undefined));
  t.notOk(csrf.verify('browser|session', ''));
  t.notOk(csrf.verify('browser|session', ['a']));
});

t.test(
  'failed sign-in counters: per client and username; per username for unknown clients only; windows end',
  async (t) => {
    const throttle = new LoginThrottle(new ResilientStore(null), {
      clientFailures: 2,
      clientWindowMs: 400,
      usernameFailures: 3,
      usernameWindowMs: 800,
    });
    /** An attempt that, when allowed, fails (a wrong password). */
    const fail = async (client: SignInClient, username: string) => {
      const verdict = await throttle.attempt(client, username);
      if (verdict.allowed) await throttle.recordFailure(client, username);
      return verdict;
    };
    const a = { ip: '192.0.2.1' };
    t.ok((await fail(a, 'Victim')).allowed);
    t.ok((await fail(a, ' victim')).allowed, 'the same username, whatever its case or spaces');
    const refused = await fail(a, 'victim');
    t.notOk(refused.allowed, 'a third attempt from that client');
    t.ok(
      !refused.allowed && refused.retryAfterSeconds === 1,
      'until its window ends (in whole seconds)',
    );
    t.ok((await fail(a, 'someone_else')).allowed, 'that client, another username: its own counter');

    t.ok((await fail({ ip: '192.0.2.2' }, 'victim')).allowed, 'another client');
    t.notOk(
      (await throttle.attempt({ ip: '192.0.2.3' }, 'victim')).allowed,
      'three failures: unknown clients are refused for that username',
    );
    t.ok(
      (await throttle.attempt({ ip: '198.51.100.9', knownBrowser: 'B'.repeat(32) }, 'victim'))
        .allowed,
      'a known browser is not',
    );

    const d = { ip: '192.0.2.4' };
    t.ok((await throttle.attempt(d, 'typo_user')).allowed);
    await throttle.recordSuccess(d, 'typo_user');
    t.ok((await throttle.attempt(d, 'typo_user')).allowed);
    t.ok((await throttle.attempt(d, 'typo_user')).allowed, 'a success cleared the earlier attempt');
    t.notOk((await throttle.attempt(d, 'typo_user')).allowed);

    // Time is the subject: the throttle's windows end.
    await sleep(850);
    t.ok((await fail(a, 'victim')).allowed, 'both windows ended');
  },
);

t.test('return_to only ever points into this site', async (t) => {
  t.equal(safeReturnTo('/account/apps', '/x'), '/account/apps');
  t.equal(
    safeReturnTo('/oauth/authorize?client_id=1&state=a%20b', '/x'),
    '/oauth/authorize?client_id=1&state=a%20b',
  );
  for (const bad of [
    '//evil.example',
    '/\\evil.example',
    'https://evil.example/',
    'javascript:alert(1)',
    'account',
    '/a b',
    undefined,
  ]) {
    t.equal(safeReturnTo(bad, '/x'), '/x', `refused: ${bad}`);
  }
});
