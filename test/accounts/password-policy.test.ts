/**
 * One password rule (NIST SP 800-63B; docs/portal.md "Accounts") wherever a password is set: the
 * portal's sign-up form and `admin user create`, which reads the password from standard input
 * (`--password -`) or USER_PASSWORD rather than from the process arguments. Common and
 * leaked-list passwords, repeats and runs, passwords built on the username, and a common word or
 * name with a few digits or symbols added (issue #43 item 6: `Summer2024` passed) are refused with
 * a message written for people; passphrases are welcome.
 */
import t from 'tap';
import { runAdmin } from '../../src/cli/admin.ts';
import { buildTestApp } from '../helpers/app.ts';
import { Browser } from '../helpers/browser.ts';
import { alertOf } from '../portal/support.ts';

const app = await buildTestApp(t, { RATE_LIMIT_SIGNIN_MAX: '1000' });

/** [password, why it is refused] for a user named ana_shop. */
const REFUSED: [string, RegExp][] = [
  ['short', /at least 8 characters/],
  ['password', /most common ones/],
  ['Password', /most common ones/],
  ['12345678', /run like 12345678|most common/],
  ['qwertyuiop', /most common ones/],
  ['iloveyou1', /most common ones/],
  ['password123', /most common ones/],
  ['aaaaaaaaaa', /one character repeated/],
  ['abcdefghij', /run like/],
  ['98765432', /run like|most common/],
  ['ana_shop', /your username/],
  ['ANA_SHOP2026', /your username/],
  ['x'.repeat(257), /at most 256 characters/],
  // A common word or name plus a year, digits or symbols: how leaked lists are made.
  ['Summer2024', /common word or name/],
  ['summer2024!', /common word or name/],
  ['Michael1985', /common word or name/],
  ['London_2026', /common word or name/],
  ['Welcome1!', /common word or name/],
  ['Sunshine!', /common word or name/],
  ['2024summer', /common word or name/],
  ['P@ssw0rd2024', /common word or name/],
  ['$unsh1ne99', /common word or name/],
  ['Velvet 2026', /common word or name/],
];
const ACCEPTED = [
  'correct horse battery',
  'tram paper velvet',
  'Grüße aus Köln 2026',
  'k3#Vq9!mZp',
  // Words with more than a few digits or symbols, or more than one word, are not the pattern.
  'summer8472910364',
  'My Summer 2024',
  'velvet tram 2026',
];

t.test('the portal sign-up form refuses weak passwords in plain words', async (t) => {
  for (const [password, why] of REFUSED) {
    const browser = new Browser(app);
    await browser.get('/portal/signup');
    const res = await browser.submit({ username: 'ana_shop', password }, '/portal/signup');
    t.equal(res.statusCode, 400, `${password.slice(0, 20)}: refused`);
    t.match(alertOf(res.body), why, `${password.slice(0, 20)}: says why`);
    t.notMatch(
      res.body,
      /<input type="password"[^>]*value=/,
      'the password is not filled in again',
    );
  }
  await t.rejects(app.services.users.getByUsername('ana_shop'), { code: 'not_found' }, 'nobody');
  for (const [i, password] of ACCEPTED.entries()) {
    const browser = new Browser(app);
    await browser.get('/portal/signup');
    const res = await browser.submit({ username: `ana_${i}`, password }, '/portal/signup');
    t.equal(res.statusCode, 303, `${password}: accepted`);
  }
});

t.test('the service and the CLI apply the same rule', async (t) => {
  for (const [password, why] of REFUSED)
    await t.rejects(
      app.services.users.create({ username: 'ana_shop', password }),
      { code: 'validation_error', details: [{ path: '/password', message: why }] },
      password.slice(0, 20),
    );
});

t.test('admin user create reads the password from stdin or USER_PASSWORD', async (t) => {
  const env = { NODE_ENV: 'test', DATABASE_URL: 'memory://' };
  const stdin = (text: string) => () => Promise.resolve(text);
  const created = await runAdmin(
    ['user', 'create', '--username', 'cli_one', '--password', '-'],
    env,
    stdin('tram paper velvet\n'),
  );
  t.equal(created.code, 0, `--password - (stderr: ${created.stderr})`);
  t.match(JSON.parse(created.stdout), { username: 'cli_one' });

  const fromEnv = await runAdmin(['user', 'create', '--username', 'cli_two'], {
    ...env,
    USER_PASSWORD: 'tram paper velvet',
  });
  t.equal(fromEnv.code, 0, `USER_PASSWORD (stderr: ${fromEnv.stderr})`);

  const none = await runAdmin(['user', 'create', '--username', 'cli_three'], env, stdin(''));
  t.equal(none.code, 2, 'no password: a usage error');
  t.match(JSON.parse(none.stderr), {
    error: { code: 'usage', message: /standard input \(--password -\) or in USER_PASSWORD/ },
  });

  const empty = await runAdmin(
    ['user', 'create', '--username', 'cli_four', '--password', '-'],
    env,
    stdin('\n'),
  );
  t.match(JSON.parse(empty.stderr), { error: { code: 'usage', message: /read no password/ } });

  const weak = await runAdmin(
    ['user', 'create', '--username', 'cli_five', '--password', '-'],
    env,
    stdin('password1\n'),
  );
  t.equal(weak.code, 1);
  t.match(JSON.parse(weak.stderr), {
    error: { code: 'validation_error', message: /most common ones/ },
  });
});
