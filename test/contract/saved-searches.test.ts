/**
 * Contract tests of the Saved searches operations: their documented examples replayed with
 * real credentials, then a scenario for every documented status that can be produced for real.
 */
import t from 'tap';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite } from './support.ts';

const suite = await contractSuite(t);
const { keys, send, unauthorized } = suite;
const replay = replayExamples(t, suite, 'Saved searches');
const missing = '0193a5b0-7c1e-7a2b-9c3d-4e5f6a7b8c9d';

t.test('createSavedSearch', async (t) => {
  const op = 'createSavedSearch';
  await send(t, {
    op,
    label: 'a brand alone',
    credential: keys.sandbox,
    body: { name: 'Levis', brand: "Levi's" },
    expect: 201,
  });
  await send(t, {
    op,
    label: 'no q and no filter',
    credential: keys.sandbox,
    body: { name: 'everything' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'an unknown field',
    credential: keys.sandbox,
    body: { name: 'x', q: 'coat', sort: 'newest' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'prices only',
    credential: keys.sandbox,
    body: { name: 'cheap', max_price_cents: 1000 },
    expect: 400,
  });
  // Refused, though GET /listings answers both with an empty page: the document's 400
  // examples of createSavedSearch, each answered with its details.
  const refusals: [string, Record<string, unknown>][] = [
    ['unknownSeller', { name: 's', seller: 'nobody_here' }],
    ['stopWordsOnly', { name: 's', q: 'the' }],
  ];
  for (const [name, body] of refusals) {
    const documented = suite.doc.at(
      `${suite.doc.operations.find((o) => o.operationId === op)!.pointer}/responses/400/content/application~1json/examples/${name}/value`,
    ) as { error: { details: unknown } } | undefined;
    t.ok(documented, `the document has the 400 example ${name}`);
    const res = await send(t, { op, label: name, credential: keys.live, body, expect: 400 });
    t.same(res.json?.error?.details, documented?.error.details, `${name}: the documented details`);
  }
  await send(t, { op, label: 'no credential', body: { name: 'x', q: 'coat' }, expect: 401 });
  await unauthorized(t, op);
  await send(t, {
    op,
    label: 'key without searches',
    credential: keys.readOnly,
    body: { name: 'x', q: 'coat' },
    expect: 403,
  });
});

t.test('listSavedSearches', async (t) => {
  const op = 'listSavedSearches';
  await send(t, { op, label: 'a page', credential: keys.live, query: { limit: '2' }, expect: 200 });
  await send(t, {
    op,
    label: 'a cursor that was never given',
    credential: keys.live,
    query: { cursor: 'yesterday' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', expect: 401 });
  await send(t, { op, label: 'key without searches', credential: keys.readOnly, expect: 403 });
});

t.test('getSavedSearch and deleteSavedSearch', async (t) => {
  for (const op of ['getSavedSearch', 'deleteSavedSearch'] as const) {
    await send(t, {
      op,
      label: 'no such saved search',
      credential: keys.live,
      path: { id: missing },
      expect: 404,
    });
    await send(t, {
      op,
      label: 'not a uuid',
      credential: keys.live,
      path: { id: 'nope' },
      expect: 400,
    });
    await send(t, { op, label: 'no credential', path: { id: missing }, expect: 401 });
    await send(t, {
      op,
      label: 'key without searches',
      credential: keys.readOnly,
      path: { id: missing },
      expect: 403,
    });
  }
});

checkCoverage(t, suite, replay);
