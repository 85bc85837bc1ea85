/**
 * The saved searches' API (OpenAPI "Saved searches"): saved, listed in keyset pages, read and
 * deleted by their app's credentials in their environment only; validated as GET /listings
 * validates the same values (the same messages), plus what a saved search needs; capped per app
 * and environment. Their `listing.matched` events at GET /api/v1/events: `read` lists every type,
 * `searches` without `read` only listing.matched (OpenAPI listEvents, "Scopes").
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { SAVED_SEARCH_CAPS } from '../../src/saved-searches/saved-searches-service.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';
import { drained, publish, save, searcher } from './support.ts';

const app = await webhooksApp(t);
const mine = await searcher(app);
const theirs = await searcher(app);

t.test('saved, listed newest first in pages, read and deleted', async (t) => {
  const a = await save(app, mine.live, { q: 'wool coat', condition: ['good', 'excellent'] });
  const b = await save(app, mine.live, { brand: 'Barbour', max_price_cents: 8000 });
  t.strictSame(a.condition, ['excellent', 'good']);
  t.equal(a.brand, null, 'unset filters are null');
  t.equal(a.last_matched_at, null);
  const first = await api(app, 'GET', '/api/v1/saved_searches?limit=1', mine.live);
  t.equal(first.status, 200);
  t.strictSame(
    first.body.data.map((s: Json) => s.id),
    [b.id],
  );
  const second = await api(
    app,
    'GET',
    `/api/v1/saved_searches?limit=1&cursor=${first.body.meta.next_cursor}`,
    mine.live,
  );
  t.strictSame(
    second.body.data.map((s: Json) => s.id),
    [a.id],
  );
  t.equal(second.body.meta.next_cursor, null);
  const sandbox = await api(app, 'GET', '/api/v1/saved_searches', mine.sandbox);
  t.equal(sandbox.body.data.length, 0, 'another environment: none');
  for (const key of [theirs.live, mine.sandbox]) {
    t.equal((await api(app, 'GET', `/api/v1/saved_searches/${a.id}`, key)).status, 404);
    t.equal((await api(app, 'DELETE', `/api/v1/saved_searches/${a.id}`, key)).status, 404);
  }
  t.equal((await api(app, 'GET', `/api/v1/saved_searches/${a.id}`, mine.live)).status, 200);
  t.equal((await api(app, 'DELETE', `/api/v1/saved_searches/${a.id}`, mine.live)).status, 204);
  t.equal((await api(app, 'DELETE', `/api/v1/saved_searches/${a.id}`, mine.live)).status, 404);
});

t.test('validated as GET /listings validates, with the same messages', async (t) => {
  const cases = [
    { q: 'one two three four five six seven eight nine' },
    // Words as PostgreSQL's parser parts them: by punctuation and invisible characters too.
    { q: Array.from({ length: 60 }, () => 'x').join(',') },
    { q: Array.from({ length: 30 }, (_, i) => `w${i}`).join('\u200b') },
    { q: 'coat', min_price_cents: 5000, max_price_cents: 100 },
  ];
  for (const values of cases) {
    const query = new URLSearchParams(
      Object.entries(values).map(([k, v]) => [k, String(v)]),
    ).toString();
    const listed = await api(app, 'GET', `/api/v1/listings?${query}`, mine.live);
    const saved = await api(app, 'POST', '/api/v1/saved_searches', mine.live, {
      name: 'x',
      ...values,
    });
    t.equal(listed.status, 400);
    t.equal(saved.status, 400);
    const [l] = listed.body.error.details;
    const [s] = saved.body.error.details;
    t.equal(s.message, l.message, `the same message: ${l.message}`);
    t.equal(s.path, l.path.replace('/query', ''), 'named as a body field');
  }
  const refused: [Json, string][] = [
    [{}, '/q'],
    [{ max_price_cents: 100, condition: ['good'] }, '/q'],
    [{ q: '-leather' }, '/q'],
    [{ q: 'the and' }, '/q'],
    [{ q: 'coat', seller: 'nobody_here' }, '/seller'],
    [{ q: 'coat', seller: 'me' }, '/seller'],
  ];
  for (const [body, path] of refused) {
    const res = await api(app, 'POST', '/api/v1/saved_searches', mine.live, { name: 'x', ...body });
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error.details[0].path, path, `${JSON.stringify(body)}: ${path}`);
  }
  // A word every match has is enough beside an exclusion; either of two words is too.
  await save(app, mine.live, { q: 'coat -leather' });
  await save(app, mine.live, { q: 'coat or jacket' });
});

t.test(
  'a text with U+0000 or an unpaired surrogate: 400 naming the field, nothing saved',
  async (t) => {
    const owner = await searcher(app);
    const fields: [string, (text: string) => Json, string][] = [
      ['name', (text) => ({ name: text, q: 'coat' }), '/name'],
      ['q', (text) => ({ q: text }), '/q'],
      ['brand', (text) => ({ brand: text }), '/brand'],
      ['category', (text) => ({ category: text }), '/category'],
      ['size', (text) => ({ size: text }), '/size'],
      ['color', (text) => ({ color: text }), '/color'],
      ['tag', (text) => ({ tag: [text] }), '/tag/0'],
    ];
    for (const [field, body, path] of fields) {
      for (const [what, text] of [
        ['U+0000', 'wool\u0000coat'],
        ['an unpaired surrogate', 'wool\ud800coat'],
      ]) {
        const res = await api(app, 'POST', '/api/v1/saved_searches', owner.live, {
          name: 'x',
          ...body(text!),
        });
        t.equal(res.status, 400, `${field} with ${what}: 400`);
        t.match(
          res.body.error,
          { code: 'validation_error', details: [{ path, message: /U\+0000|surrogate/ }] },
          `${field} with ${what}: named ${path}`,
        );
      }
    }
    const listed = await api(app, 'GET', '/api/v1/saved_searches', owner.live);
    t.strictSame(listed.body.data, [], 'none was saved');
  },
);

t.test("a deleted app's saved searches are deleted with it, keys included", async (t) => {
  const doomed = await searcher(app);
  const kept = await save(app, mine.live, { q: 'kept coat' });
  const a = await save(app, doomed.live, { q: 'wool coat' });
  const b = await save(app, doomed.sandbox, { brand: 'Barbour' });
  const { name } = await app.services.apps.get(doomed.appId);
  await app.services.apps.delete(doomed.appId, name);
  const [left] = await queryRows<{ searches: number; keys: number }>(
    app.db,
    sql`select (select count(*)::int from saved_searches where app_id = ${doomed.appId}) as searches,
      (select count(*)::int from saved_search_keys
        where saved_search_id in (${a.id}, ${b.id})) as keys`,
  );
  t.strictSame(left, { searches: 0, keys: 0 }, 'none left, nor their keys');
  const other = await api(app, 'GET', `/api/v1/saved_searches/${kept.id}`, mine.live);
  t.equal(other.status, 200, "another app's are kept");
});

t.test(`at most ${SAVED_SEARCH_CAPS.perApp} per app and environment`, async (t) => {
  const owner = await searcher(app);
  const caller = {
    kind: 'api_key' as const,
    environment: 'sandbox' as const,
    userId: owner.userId,
    appId: owner.appId,
    appOwnerId: owner.userId,
    credentialId: null,
    scopes: ['searches'],
  };
  for (let i = 0; i < SAVED_SEARCH_CAPS.perApp; i += 1)
    await app.services.savedSearches.create(caller, { name: `s${i}`, q: `word${i}` });
  const over = await api(app, 'POST', '/api/v1/saved_searches', owner.sandbox, {
    name: 'one more',
    q: 'coat',
  });
  t.equal(over.status, 409);
  t.equal(over.body.error.code, 'conflict');
  const live = await api(app, 'POST', '/api/v1/saved_searches', owner.live, {
    name: 'live has room',
    q: 'coat',
  });
  t.equal(live.status, 201, 'the other environment has its own');
});

t.test(
  'GET /events: read lists every type, searches without read only listing.matched',
  async (t) => {
    const dev = await searcher(app);
    const keyWith = async (scopes: string) =>
      (await app.services.keys.create({ appId: dev.appId, env: 'sandbox', scopes })).key;
    const readOnly = await keyWith('read');
    const searchesOnly = await keyWith('searches');
    const neither = await keyWith('listings:write');
    await save(app, dev.sandbox, { q: 'samovar' });
    const listing = await publish(app, dev.sandbox, { title: 'Brass samovar' });
    await drained(app);
    const types = (res: { body: Json }) => res.body.data.map((e: Json) => e.type).sort();

    const all = await api(app, 'GET', '/api/v1/events', readOnly);
    t.equal(all.status, 200);
    t.strictSame(types(all), ['listing.created', 'listing.matched'], '`read`: every type');
    const matched = await api(app, 'GET', '/api/v1/events', searchesOnly);
    t.equal(matched.status, 200, '`searches` alone may list events');
    t.strictSame(types(matched), ['listing.matched'], 'only listing.matched');
    t.equal(matched.body.data[0].data.listing.id, listing.id);
    const typed = await api(app, 'GET', '/api/v1/events?type=listing.matched', searchesOnly);
    t.strictSame(types(typed), ['listing.matched'], 'also with type=listing.matched');
    const polled = await api(app, 'GET', '/api/v1/events?wait=0', searchesOnly);
    t.equal(polled.status, 200, 'and with wait');

    const refused = (url: string, key: string) =>
      app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
    const other = await refused('/api/v1/events?type=listing.created', searchesOnly);
    t.equal(other.statusCode, 403, 'another type with `searches` alone: 403');
    t.equal(other.json().error.code, 'forbidden');
    t.match(other.headers['www-authenticate'], /error="insufficient_scope", scope="read"/);
    const none = await refused('/api/v1/events', neither);
    t.equal(none.statusCode, 403, 'neither scope: 403');
    t.match(none.headers['www-authenticate'], /error="insufficient_scope"/);
  },
);
