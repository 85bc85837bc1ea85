/**
 * Contract tests of the Audit operation (GET /api/v1/audit_events): its documented example
 * replayed with real API keys carrying audit:read (a sandbox and a live key), then a scenario
 * for every documented status that can be produced for real.
 */
import t from 'tap';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite } from './support.ts';

const suite = await contractSuite(t);
const { app, keys, seller, send, unauthorized, tokens } = suite;
// Entries to list: two changes recorded by the admin CLI's actor.
for (const target of ['first', 'second'])
  await app.services.audit.record(
    seller.appId,
    { type: 'admin_cli' },
    { action: 'app.renamed', target },
  );
const replay = replayExamples(t, suite, 'Audit');
const credential = keys.auditSandbox;

t.test('listAuditEvents', async (t) => {
  const op = 'listAuditEvents';
  const first = await send(t, {
    op,
    label: 'a page of 1',
    credential,
    query: { limit: '1' },
    expect: 200,
  });
  t.type(first.json?.meta?.next_cursor, 'string', 'a next page');
  await send(t, {
    op,
    label: 'the next page',
    credential,
    query: { limit: '1', cursor: String(first.json?.meta?.next_cursor) },
    expect: 200,
  });
  await send(t, {
    op,
    label: 'filtered',
    credential: keys.auditLive,
    query: { actor: 'admin_cli', action: 'app.renamed' },
    expect: 200,
  });
  await send(t, { op, label: 'limit=0', credential, query: { limit: '0' }, expect: 400 });
  await send(t, { op, label: 'limit=101', credential, query: { limit: '101' }, expect: 400 });
  await send(t, {
    op,
    label: 'unknown action',
    credential,
    query: { action: 'nope' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'altered cursor',
    credential,
    query: { cursor: 'bm9wZQ' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  await send(t, { op, label: 'key without audit:read', credential: keys.sandbox, expect: 403 });
  await send(t, { op, label: 'OAuth access token', credential: tokens.full, expect: 403 });
});

checkCoverage(t, suite, replay);
