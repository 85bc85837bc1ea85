// The page helpers on their own (no app, no database): escaping, CSRF tokens, the failed
// sign-in counters (in memory), return_to checks, and the cookies under an https BASE_URL.
import type { FastifyReply, FastifyRequest } from 'fastify';
import t from 'tap';
import type { UserRow } from '../../src/db/schema.ts';
import { ResilientStore } from '../../src/lib/rate-limit-store.ts';
import { Csrf } from '../../src/web/csrf.ts';
import { safeReturnTo } from '../../src/web/forms.ts';
import { html, pageHeaders, SafeHtml } from '../../src/web/html.ts';
import { LoginThrottle, type SignInClient } from '../../src/web/login-throttle.ts';
import type { SessionsService } from '../../src/web/sessions.ts';
import { WebContext } from '../../src/web/web-context.ts';
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
  t.equal(headers['referrer-policy'], 'no-referrer');
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

t.test('under an https BASE_URL the cookies are Secure and __Host- prefixed', async (t) => {
  const sessions = {
    create: async () => ({ token: 'T'.repeat(43) }),
    destroy: async () => {},
    resolve: async () => null,
  } as unknown as SessionsService;
  const set: { name: string; value: string; options: Record<string, unknown> }[] = [];
  const reply = {
    setCookie: (name: string, value: string, options: Record<string, unknown>) =>
      set.push({ name, value, options }),
    clearCookie: () => {},
  } as unknown as FastifyReply;
  const request = { cookies: {} } as unknown as FastifyRequest;

  const secure = new WebContext(sessions, {
    baseUrl: 'https://market.example.com',
    sessionSecret: 'x'.repeat(32),
  });
  await secure.startSession(request, reply, { id: 'u1' } as UserRow);
  secure.csrfToken(request, reply);
  secure.rememberBrowser(request, reply, 'u1_name');
  t.strictSame(
    set.map((c) => c.name),
    ['__Host-svc_session', '__Host-svc_browser', '__Host-svc_device'],
  );
  for (const c of set) {
    t.match(
      c.options,
      { secure: true, httpOnly: true, sameSite: 'lax', path: '/' },
      `${c.name}: Secure, HttpOnly, SameSite=Lax, Path=/`,
    );
  }
  t.equal(set[0]?.options.maxAge, 12 * 60 * 60, 'the session cookie lasts as long as the session');
  t.equal(set[2]?.options.maxAge, 180 * 24 * 60 * 60, 'a browser stays known for 180 days');

  const plain = new WebContext(sessions, {
    baseUrl: 'http://127.0.0.1:3000',
    sessionSecret: 'x'.repeat(32),
  });
  t.equal(plain.cookieNames.session, 'svc_session');
  t.notOk(plain.secure);
});
