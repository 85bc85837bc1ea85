/**
 * The README's first session with curl, pasted into bash as a reader would, against a real
 * server on a socket: it must sign up, get a sandbox key (KEY), save a search, create a listing
 * (ID), publish, page, search for it, read its saved search's listing.matched event and archive
 * it, with nothing set beforehand. Only the server address differs.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import t from 'tap';
import { projectFile } from '../src/project-files.ts';
import { listeningApp } from './helpers/listening.ts';

const run = promisify(execFile);
const readme = readFileSync(projectFile('README.md'), 'utf8');

/** The shell block under "## A first session with curl". */
function curlSession(): string {
  const section = readme.split(/^## A first session with curl$/m)[1] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README.md has no sh block under "A first session with curl"');
  return block;
}

t.test('the README curl session runs as written and leaves an archived listing', async (t) => {
  const session = curlSession();
  t.match(session, /^S=http:\/\/127\.0\.0\.1:3000;/m, 'it names the default address');
  const { localUrl, app } = await listeningApp(t, { RATE_LIMIT_SIGNIN_MAX: '100' });
  const script = session.replace('S=http://127.0.0.1:3000;', `S=${localUrl};`);
  const { stdout } = await run('bash', ['-c', `set -eu\n${script}`], { timeout: 60_000 });

  const key = /^KEY=(svc_sandbox_[A-Za-z0-9_-]+)$/m.exec(stdout)?.[1];
  const id = /^ID=([0-9a-f-]{36})$/m.exec(stdout)?.[1];
  t.ok(key, 'a sandbox key was created in the portal and set as KEY');
  t.ok(id, 'the created listing id was set as ID');
  const answers = stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { data: unknown });
  t.equal(
    answers.length,
    6,
    'the saved search, PATCH, the page, the search, the events and DELETE each answered JSON',
  );
  const [saved, patched, page, searched, events, archived] = answers as [
    { data: { id: string } },
    { data: { status: string } },
    { data: { id: string }[] },
    { data: { id: string }[]; meta: { next_cursor: string | null } },
    { data: { type: string; data: { saved_search_id: string; listing: { id: string } } }[] },
    { data: { status: string; id: string } },
  ];
  t.ok(saved.data.id, 'the search was saved with the key it made (scope searches)');
  t.equal(patched.data.status, 'active');
  t.same(
    page.data.map((listing) => listing.id),
    [id],
  );
  t.match(session, /\$B\/listings\?q=[^"]*&sort=/, 'the search sends q and sort');
  t.same(
    searched.data.map((listing) => listing.id),
    [id],
    'the search finds the listing',
  );
  t.equal(searched.meta.next_cursor, null, 'on one page');
  t.same(
    events.data.map((event) => [event.type, event.data.saved_search_id, event.data.listing.id]),
    [['listing.matched', saved.data.id, id]],
    'the events call shows the saved search matching the published listing',
  );
  t.equal(archived.data.status, 'archived');
  t.equal(archived.data.id, id);

  // What the session made is really there, under the key it printed.
  const me = await app.inject({ url: '/api/v1/me', headers: { authorization: `Bearer ${key}` } });
  t.equal(me.statusCode, 200);
  t.equal(me.json().meta.environment, 'sandbox');
});
