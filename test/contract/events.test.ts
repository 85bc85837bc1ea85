/**
 * Contract tests of the Events operations (the app's event log; the webhooks the server sends
 * are not served, so not replayed): their documented examples replayed with real credentials,
 * then a scenario for every documented status that can be produced for real.
 */
import t from 'tap';
import { checkCoverage, replayExamples } from './replay.ts';
import { contractSuite } from './support.ts';

const suite = await contractSuite(t);
const { keys, send, unauthorized } = suite;
const replay = replayExamples(t, suite, 'Events');

t.test('listEvents', async (t) => {
  const op = 'listEvents';
  await send(t, {
    op,
    label: 'type filter',
    credential: keys.sandbox,
    query: { type: 'listing.created', limit: '5' },
    expect: 200,
  });
  await send(t, {
    op,
    label: 'limit=0',
    credential: keys.sandbox,
    query: { limit: '0' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'unknown type',
    credential: keys.sandbox,
    query: { type: 'listing.exploded' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'cursor is not a date-time',
    credential: keys.sandbox,
    query: { cursor: 'yesterday' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  await send(t, { op, label: 'key without read', credential: keys.writeOnly, expect: 403 });
});

checkCoverage(t, suite, replay);
