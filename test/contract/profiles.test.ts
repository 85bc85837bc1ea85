/**
 * Contract tests of the Profiles operations (the caller's profile, public seller profiles):
 * their documented examples replayed with real credentials, then a scenario for every
 * documented status that can be produced for real.
 */
import t from 'tap';
import { header } from './recorder.ts';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite } from './support.ts';

const suite = await contractSuite(t);
const { keys, oauth, rival, seller, send, tokens, unauthorized } = suite;
const replay = replayExamples(t, suite, 'Profiles', {
  // "OAuth access tokens act as the user who authorized the app" (API keys: as the app owner).
  getMe: (t, res, caller) => {
    const wanted = caller.credential === tokens.full ? oauth.user.username : seller.username;
    t.equal(res.json?.data?.username, wanted, `as ${caller.name}: the profile of ${wanted}`);
  },
});

t.test('getMe', async (t) => {
  const me = await send(t, {
    op: 'getMe',
    label: 'key with only read',
    credential: keys.readOnly,
    expect: 200,
  });
  t.equal(me.json?.data?.username, seller.username, 'the key acts as its app owner');
  await send(t, { op: 'getMe', label: 'no credential', expect: 401 });
  await unauthorized(t, 'getMe');
  const noRead = await send(t, {
    op: 'getMe',
    label: 'key without read',
    credential: keys.writeOnly,
    expect: 403,
  });
  t.match(
    header(noRead.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="read"/,
    'a missing scope is named in WWW-Authenticate',
  );
});

t.test('getProfile', async (t) => {
  await send(t, {
    op: 'getProfile',
    label: 'with a live key',
    credential: keys.live,
    path: { username: rival.username },
    expect: 200,
  });
  await send(t, {
    op: 'getProfile',
    label: 'unknown username',
    path: { username: 'no_such_seller' },
    expect: 404,
  });
  await send(t, {
    op: 'getProfile',
    label: 'not a valid username',
    path: { username: 'Not A Username!' },
    expect: 404,
  });
  await send(t, {
    op: 'getProfile',
    label: 'username in another case',
    path: { username: seller.username.toUpperCase() },
    expect: 404,
  });
  await unauthorized(t, 'getProfile', { username: seller.username });
});

checkCoverage(t, suite, replay);
