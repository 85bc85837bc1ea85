/**
 * Contract tests of the System operations (health, the document itself): their documented
 * examples replayed with real credentials, then a scenario for every documented status that
 * can be produced for real; answers outside any operation use the documented error envelope.
 */
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { bearer } from '../helpers/accounts.ts';
import { header } from './recorder.ts';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite, UNKNOWN_ID } from './support.ts';

const suite = await contractSuite(t);
const { app, doc, keys, send, unauthorized } = suite;
const replay = replayExamples(t, suite, 'System');

t.test('getHealth', async (t) => {
  const checked = await send(t, {
    op: 'getHealth',
    label: 'db=1 with a live key',
    credential: keys.live,
    query: { db: '1' },
    expect: 200,
  });
  t.equal(checked.json?.data?.db, true, 'db=1 checks the database');
  const unchecked = await send(t, {
    op: 'getHealth',
    label: 'db=0',
    query: { db: '0' },
    expect: 200,
  });
  t.equal(unchecked.json?.data?.db, null, 'db is null without db=1');
  const chosen = await send(t, {
    op: 'getHealth',
    label: 'with a client-chosen X-Request-Id',
    headers: { 'x-request-id': 'client-chosen' },
    expect: 200,
  });
  t.not(
    header(chosen.headers, 'x-request-id'),
    'client-chosen',
    'an incoming X-Request-Id is ignored',
  );
  await send(t, {
    op: 'getHealth',
    label: 'db=2 is not an allowed value',
    query: { db: '2' },
    expect: 400,
  });
  await send(t, {
    op: 'getHealth',
    label: 'db=yes is not an allowed value',
    query: { db: 'yes' },
    expect: 400,
  });
  await unauthorized(t, 'getHealth');
});

t.test('getOpenApiJson and getOpenApiYaml serve this document', async (t) => {
  const json = await send(t, { op: 'getOpenApiJson', label: 'anonymous', expect: 200 });
  t.strictSame(
    Object.keys(json.json?.paths ?? {}),
    Object.keys(doc.raw.paths as object),
    'the JSON document has the same paths',
  );
  t.equal(
    json.json?.info?.version,
    (doc.raw.info as { version: string }).version,
    'the JSON document has the same version',
  );
  const yaml = await send(t, {
    op: 'getOpenApiYaml',
    label: 'with a sandbox key',
    credential: keys.sandbox,
    expect: 200,
  });
  const served = parseYaml(yaml.text) as { paths: object; components: object };
  t.strictSame(
    Object.keys(served.paths),
    Object.keys(doc.raw.paths as object),
    'the YAML document has the same paths',
  );
  t.strictSame(served.components, doc.raw.components, 'the YAML document has the same components');
  await unauthorized(t, 'getOpenApiJson');
  await unauthorized(t, 'getOpenApiYaml');
});

// Answers outside any operation still use the documented error envelope.

t.test('unknown routes and methods answer the error envelope', async (t) => {
  const errorSchema = doc.schemaPointerOf('ErrorResponse');
  const cases = [
    { method: 'GET', url: '/api/v1/no-such-thing', status: 404, code: 'not_found' },
    {
      method: 'PUT',
      url: `/api/v1/listings/${UNKNOWN_ID}`,
      status: 405,
      code: 'method_not_allowed',
    },
    { method: 'DELETE', url: '/api/v1/listings', status: 405, code: 'method_not_allowed' },
  ] as const;
  for (const c of cases) {
    const res = await app.inject({ method: c.method, url: c.url, headers: bearer(keys.sandbox) });
    const body = res.json();
    t.equal(res.statusCode, c.status, `${c.method} ${c.url}`);
    t.strictSame(doc.validate(errorSchema, body), [], `${c.method} ${c.url}: ErrorResponse`);
    t.equal(body.error?.code, c.code);
    t.equal(
      body.meta?.request_id,
      res.headers['x-request-id'],
      'meta.request_id equals X-Request-Id',
    );
    if (c.status === 405) t.ok(res.headers.allow, '405 carries Allow');
  }
});

checkCoverage(t, suite, replay);
