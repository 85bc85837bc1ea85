/**
 * Contract tests of the Listings operations (the public feed, single reads, the seller's
 * writes): their documented examples replayed with real credentials, then a scenario for every
 * documented status that can be produced for real.
 */
import t from 'tap';
import { responseFor } from './document.ts';
import { header } from './recorder.ts';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite, listingBody, MiB, UNKNOWN_ID } from './support.ts';

const suite = await contractSuite(t);
const { createListing, doc, fixtures, keys, send, tokens, unauthorized } = suite;

/** The archived listing the batch example's third item upserts (a 409 no schema can foresee). */
const ARCHIVED_EXTERNAL_ID = 'inv-000311';
t.test(
  'fixtures: an archived listing inv-000311 for each caller of the batch example',
  async (t) => {
    for (const [name, credential] of [
      ['sandbox key', keys.sandbox],
      ['live key', keys.live],
      ['OAuth access token', tokens.full],
    ] as const) {
      const made = await send(t, {
        op: 'createListing',
        label: `fixture: ${ARCHIVED_EXTERNAL_ID} as ${name}`,
        credential,
        body: {
          title: 'Archived linen shirt',
          price_cents: 2200,
          external_id: ARCHIVED_EXTERNAL_ID,
        },
        // 409: a caller acting for the same seller in the same environment archived it already.
        expect: [201, 409],
      });
      if (made.status === 409) continue;
      await send(t, {
        op: 'archiveListing',
        label: `fixture: archive ${ARCHIVED_EXTERNAL_ID} as ${name}`,
        credential,
        path: { id: made.json.data.id },
        expect: 200,
      });
    }
  },
);

const replay = replayExamples(t, suite, 'Listings', {
  // The batch example documents what each of its items gives once the createListing examples
  // ran before it: inv-000482 upserted (200), inv-000483 created (201), inv-000311 refused
  // (an archived listing of the seller, 409: a refusal the request's schema cannot foresee, so
  // the example validates against BatchRequest as every generic validator reads it).
  batchCreateListings: (t, res, caller) => {
    if (res.status !== 200) return;
    const example = responseFor(doc.operation('batchCreateListings'), 200)?.content.get(
      'application/json',
    )?.examples[0]?.value as { data: { results: { ok: boolean; status: number }[] } } | undefined;
    t.strictSame(
      (res.json?.data?.results ?? []).map((r: { ok: boolean; status: number }) => [r.ok, r.status]),
      example?.data.results.map((r) => [r.ok, r.status]),
      `batch example as ${caller.name} gives the documented per-item results`,
    );
  },
});

t.test('listListings', async (t) => {
  const first = await send(t, {
    op: 'listListings',
    label: 'limit=1',
    query: { limit: '1' },
    expect: 200,
  });
  const unchanged = await send(t, {
    op: 'listListings',
    label: 'limit=1, If-None-Match: the ETag of that page',
    query: { limit: '1' },
    headers: { 'if-none-match': String(first.headers.etag) },
    expect: 304,
  });
  t.equal(unchanged.text, '', '304: no body');
  t.equal(unchanged.headers.etag, first.headers.etag, '304: the same ETag');
  const cursor = first.json?.meta?.next_cursor;
  t.type(cursor, 'string', 'a full page has a next_cursor');
  if (typeof cursor === 'string')
    await send(t, {
      op: 'listListings',
      label: 'next page by cursor',
      query: { limit: '1', cursor },
      expect: 200,
    });
  const sandbox = await send(t, {
    op: 'listListings',
    label: 'sandbox key sees its drafts',
    credential: keys.sandbox,
    query: { limit: '100' },
    expect: 200,
  });
  t.ok(
    (sandbox.json?.data ?? []).some((l: { id: string }) => l.id === fixtures.sandboxDraftNoPhoto),
    "a sandbox key sees its owner's sandbox drafts",
  );
  for (const limit of ['0', '101', '2.5', 'abc', '-1']) {
    await send(t, { op: 'listListings', label: `limit=${limit}`, query: { limit }, expect: 400 });
  }
  await send(t, {
    op: 'listListings',
    label: 'cursor is not a date-time',
    query: { cursor: 'yesterday' },
    expect: 400,
  });
  await unauthorized(t, 'listListings');
  const ownerView = await send(t, {
    op: 'listListings',
    label: 'seller=me with a key without listings:write',
    credential: keys.readOnly,
    query: { seller: 'me' },
    expect: 403,
  });
  t.match(
    header(ownerView.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="listings:write"/,
    'the owner view names the scope it needs',
  );
});

t.test('createListing', async (t) => {
  const op = 'createListing';
  const credential = keys.sandbox;
  const created = await send(t, {
    op,
    label: 'new external_id',
    credential,
    body: listingBody('Created for upsert', { external_id: 'contract-upsert' }),
    expect: 201,
  });
  t.equal(
    header(created.headers, 'location'),
    `/api/v1/listings/${created.json?.data?.id}`,
    'Location names the new listing',
  );
  const upserted = await send(t, {
    op,
    label: 'same external_id through Idempotency-Key: upsert',
    credential,
    headers: { 'idempotency-key': 'contract-upsert' },
    body: listingBody('Upserted title'),
    expect: 200,
  });
  t.equal(upserted.json?.data?.id, created.json?.data?.id, 'the upsert answers the same listing');
  t.equal(
    upserted.json?.meta?.idempotency_key,
    'contract-upsert',
    'meta.idempotency_key echoes the header',
  );

  const invalid: [string, unknown][] = [
    ['title too short', listingBody('ab')],
    ['both prices', listingBody('Both prices', { price_dollars: 25 })],
    ['no price', { title: 'No price at all' }],
    ['unknown field', listingBody('Unknown field', { colour: 'red' })],
    ['price_cents as a string', listingBody('String price', { price_cents: '2500' })],
    ['price_dollars with three decimals', { title: 'Three decimals', price_dollars: 19.999 }],
    ['status archived', listingBody('Archived on create', { status: 'archived' })],
    ['active without a photo', { title: 'Active, no photo', price_cents: 100, status: 'active' }],
    ['a JSON array', []],
  ];
  for (const [label, body] of invalid) await send(t, { op, label, credential, body, expect: 400 });
  await send(t, {
    op,
    label: 'Idempotency-Key differs from body external_id',
    credential,
    headers: { 'idempotency-key': 'key-one' },
    body: listingBody('Mismatched keys', { external_id: 'key-two' }),
    expect: 400,
  });
  await send(t, { op, label: 'malformed JSON', credential, rawBody: '{"title": ', expect: 400 });
  await send(t, { op, label: 'empty JSON body', credential, rawBody: '', expect: 400 });

  await send(t, { op, label: 'no credential', body: listingBody('Anonymous write'), expect: 401 });
  await unauthorized(t, op, {}, { body: listingBody('Bad credential write') });
  const scope = await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    body: listingBody('Read-only write'),
    expect: 403,
  });
  t.match(
    header(scope.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="listings:write"/,
    'the missing scope is named',
  );

  await send(t, {
    op,
    label: 'external_id of an archived listing',
    credential,
    body: listingBody('Upsert archived', { external_id: fixtures.archivedExternalId }),
    expect: 409,
  });
  await send(t, {
    op,
    label: 'body over 1 MiB',
    credential,
    rawBody: JSON.stringify(listingBody('Huge', { description: 'x'.repeat(MiB) })),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    rawBody: 'title=Plain',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('batchCreateListings', async (t) => {
  const op = 'batchCreateListings';
  const credential = keys.sandbox;
  const item = (n: number, extra: Record<string, unknown> = {}) =>
    listingBody(`Batch item ${n}`, extra);

  const allFailed = await send(t, {
    op,
    label: 'every item fails (no photo; archived external_id)',
    credential,
    body: {
      items: [
        { title: 'Active, no photo', price_cents: 100, status: 'active' },
        item(1, { external_id: fixtures.archivedExternalId }),
      ],
    },
    expect: 422,
  });
  t.strictSame(
    (allFailed.json?.data?.results ?? []).map((r: { ok: boolean; status: number }) => [
      r.ok,
      r.status,
    ]),
    [
      [false, 400],
      [false, 409],
    ],
    'each failed item has the status a single POST would have answered',
  );
  t.match(
    allFailed.json?.meta,
    { total: 2, created: 0, updated: 0, failed: 2, max_per_request: 25 },
    'meta counts the failures',
  );

  // The document: "Each entry is validated against ListingCreate on its own; an invalid entry is
  // a failed result (status: 400, details paths relative to the entry), not a request-level error."
  const mixed = await send(t, {
    op,
    label: 'one schema-invalid item among valid ones',
    credential,
    body: { items: [item(2), { title: 'ab', price_cents: 100 }] },
    expect: 200,
  });
  if (mixed.status === 200) {
    t.match(mixed.json?.data?.results?.[1], {
      index: 1,
      ok: false,
      status: 400,
      error: { code: 'validation_error', details: [{ path: '/title' }] },
    });
  }

  for (const [label, body] of [
    ['no items', { items: [] }],
    ['26 items', { items: Array.from({ length: 26 }, (_, n) => item(n)) }],
    ['a top-level field besides items', { items: [item(3)], dry_run: true }],
    ['items is not an array', { items: item(4) }],
    ['a JSON array', [item(5)]],
  ] as const) {
    await send(t, { op, label, credential, body, expect: 400 });
  }
  await send(t, { op, label: 'malformed JSON', credential, rawBody: '{"items": [', expect: 400 });

  await send(t, { op, label: 'no credential', body: { items: [item(6)] }, expect: 401 });
  await unauthorized(t, op, {}, { body: { items: [item(7)] } });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    body: { items: [item(8)] },
    expect: 403,
  });

  // The batch endpoint accepts up to 2 MiB (Errors table, PayloadTooLarge): 1.5 MiB of
  // whitespace around a valid body is within its limit.
  const padded = JSON.stringify({ items: [item(9)] }) + ' '.repeat(1.5 * MiB);
  await send(t, {
    op,
    label: 'valid body of 1.5 MiB (limit is 2 MiB on batch)',
    credential,
    rawBody: padded,
    expect: 200,
  });
  await send(t, {
    op,
    label: 'body over 2 MiB',
    credential,
    rawBody: JSON.stringify({ items: [item(10, { description: 'x'.repeat(2 * MiB) })] }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    rawBody: 'items',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('getListing', async (t) => {
  const op = 'getListing';
  const publicView = await send(t, {
    op,
    label: 'anonymous, live active',
    path: { id: fixtures.liveActive },
    expect: 200,
  });
  t.notOk(
    'external_id' in (publicView.json?.data ?? {}) ||
      'api_environment' in (publicView.json?.data ?? {}),
    'no owner fields for others',
  );
  const ownerView = await send(t, {
    op,
    label: 'owner live key',
    credential: keys.live,
    path: { id: fixtures.liveActive },
    expect: 200,
  });
  t.match(ownerView.json?.data, { api_environment: 'live' }, 'owner fields for the owner');
  t.not(ownerView.headers.etag, publicView.headers.etag, "the owner's view has its own ETag");
  await send(t, {
    op,
    label: 'owner live key, If-None-Match: W/ and a list holding its ETag',
    credential: keys.live,
    path: { id: fixtures.liveActive },
    headers: { 'if-none-match': `"other", W/${String(ownerView.headers.etag)}` },
    expect: 304,
  });
  await send(t, {
    op,
    label: "owner live key, If-None-Match: the public view's ETag",
    credential: keys.live,
    path: { id: fixtures.liveActive },
    headers: { 'if-none-match': String(publicView.headers.etag) },
    expect: 200,
  });
  t.ok(
    'external_id' in (ownerView.json?.data ?? {}),
    'external_id is present (null) for the owner',
  );
  await send(t, {
    op,
    label: 'rival live key, live active listing of another seller',
    credential: keys.rivalLive,
    path: { id: fixtures.liveActive },
    expect: 200,
  });

  await send(t, { op, label: 'id is not a uuid', path: { id: 'not-a-uuid' }, expect: 400 });
  await unauthorized(t, op, { id: fixtures.liveActive });
  await send(t, { op, label: 'unknown id', path: { id: UNKNOWN_ID }, expect: 404 });
  await send(t, {
    op,
    label: 'sandbox listing, live key of its owner',
    credential: keys.live,
    path: { id: fixtures.sandboxActive },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'sandbox listing, anonymous',
    path: { id: fixtures.sandboxActive },
    expect: 404,
  });
  await send(t, {
    op,
    label: "another seller's live draft",
    credential: keys.live,
    path: { id: fixtures.rivalLiveDraft },
    expect: 404,
  });
});

t.test('updateListing', async (t) => {
  const op = 'updateListing';
  const credential = keys.sandbox;
  const id = fixtures.sandboxActive;
  await send(t, {
    op,
    label: 'change the title',
    credential,
    path: { id },
    body: { title: 'Renamed fixture' },
    expect: 200,
  });

  const invalid: [string, string, unknown][] = [
    ['empty body', id, {}],
    ['unknown field', id, { colour: 'red' }],
    ['status archived', id, { status: 'archived' }],
    ['both prices', id, { price_cents: 100, price_dollars: 1 }],
    ['title too short', id, { title: 'ab' }],
    ['remove the last photo of an active listing', id, { cover_image_url: null, image_urls: [] }],
    ['make active without a photo', fixtures.sandboxDraftNoPhoto, { status: 'active' }],
  ];
  for (const [label, target, body] of invalid)
    await send(t, { op, label, credential, path: { id: target }, body, expect: 400 });
  await send(t, {
    op,
    label: 'id is not a uuid',
    credential,
    path: { id: 'not-a-uuid' },
    body: { title: 'Bad id' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'malformed JSON',
    credential,
    path: { id },
    rawBody: '{"title"',
    expect: 400,
  });

  await send(t, {
    op,
    label: 'no credential',
    path: { id },
    body: { title: 'Anonymous' },
    expect: 401,
  });
  await unauthorized(t, op, { id }, { body: { title: 'Bad credential' } });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    path: { id },
    body: { title: 'Read only' },
    expect: 403,
  });
  await send(t, {
    op,
    label: "another seller's live active listing",
    credential: keys.live,
    path: { id: fixtures.rivalLiveActive },
    body: { title: 'Not mine' },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'unknown id',
    credential,
    path: { id: UNKNOWN_ID },
    body: { title: 'Nobody' },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'sandbox listing with a live key',
    credential: keys.live,
    path: { id },
    body: { title: 'Other env' },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'archived listing',
    credential,
    path: { id: fixtures.sandboxArchived },
    body: { title: 'Revive' },
    expect: 409,
  });
  await send(t, {
    op,
    label: 'body over 1 MiB',
    credential,
    path: { id },
    rawBody: JSON.stringify({ description: 'x'.repeat(MiB) }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    path: { id },
    rawBody: 'title=Plain',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('archiveListing', async (t) => {
  const op = 'archiveListing';
  const id = await createListing(
    t,
    keys.sandbox,
    listingBody('To be archived twice'),
    'listing to archive twice',
  );
  const first = await send(t, {
    op,
    label: 'archive',
    credential: keys.sandbox,
    path: { id },
    expect: 200,
  });
  t.equal(first.json?.data?.status, 'archived');
  await send(t, {
    op,
    label: 'archive again returns it again',
    credential: keys.sandbox,
    path: { id },
    expect: 200,
  });

  await send(t, {
    op,
    label: 'id is not a uuid',
    credential: keys.sandbox,
    path: { id: 'not-a-uuid' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', path: { id: fixtures.liveActive }, expect: 401 });
  await unauthorized(t, op, { id: fixtures.liveActive });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    path: { id: fixtures.sandboxActive },
    expect: 403,
  });
  await send(t, {
    op,
    label: "another seller's live active listing",
    credential: keys.live,
    path: { id: fixtures.rivalLiveActive },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'unknown id',
    credential: keys.sandbox,
    path: { id: UNKNOWN_ID },
    expect: 404,
  });
  await send(t, {
    op,
    label: "another seller's live draft",
    credential: keys.live,
    path: { id: fixtures.rivalLiveDraft },
    expect: 404,
  });
});

checkCoverage(t, suite, replay);
