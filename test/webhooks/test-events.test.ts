/**
 * Test events on demand (OpenAPI createTestEvent, issue #59 item 7): a sandbox event of any
 * listing type, marked `data.test: true`, delivered (signed) to the app's active sandbox
 * endpoints that enabled its type and listed by GET /api/v1/events, where `listen` hears it;
 * a live key is 403, an unknown type 400 naming the field, a key without webhooks:write 403.
 */
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, createEndpoint, startReceiver, webhooksApp, type Json } from './support.ts';

const app = await webhooksApp(t);
const receiver = await startReceiver(t);
const dev = await createDeveloper(app);
const key = await createKey(app, dev, 'sandbox', 'read webhooks:write');
await createEndpoint(app, receiver, { appId: dev.appId, path: '/all' });
const archivedOnly = await createEndpoint(app, receiver, { appId: dev.appId, path: '/archived' });
await app.services.endpoints.update(archivedOnly.id, { enabledEvents: ['listing.archived'] });

t.test('each type: recorded, delivered where enabled, listed, marked as a test', async (t) => {
  for (const type of [
    'listing.created',
    'listing.updated',
    'listing.archived',
    'listing.matched',
  ]) {
    const res = await api(app, 'POST', '/api/v1/events/test', key, { type });
    t.equal(res.status, 201, type);
    const event = res.body.data.event as Json;
    t.equal(event.type, type);
    t.equal(event.data.test, true, 'marked as a test');
    t.equal(res.body.data.deliveries, type === 'listing.archived' ? 2 : 1, 'where enabled');
    t.match(event.data.listing, { id: String, title: String, price_cents: Number });
    if (type === 'listing.matched') t.match(event.data.saved_search_id, /^[0-9a-f-]{36}$/);
    const received = await waitUntil(`${type} at /all`, async () =>
      receiver.to('/all').find((r) => r.event?.event_id === event.event_id),
    );
    t.equal(received.verifyError, null, 'signed as every event');
    t.same((received.event as Json).data, event.data, 'the payload answered is the one sent');
    const listed = await api(app, 'GET', `/api/v1/events?type=${type}`, key);
    t.ok(
      listed.body.data.some((e: Json) => e.event_id === event.event_id),
      'GET /api/v1/events lists it (listen hears it)',
    );
  }
  await waitUntil('the archived one at /archived', async () =>
    receiver.to('/archived').some((r) => r.event?.type === 'listing.archived'),
  );
  t.notOk(
    receiver.to('/archived').some((r) => r.event?.type !== 'listing.archived'),
    'not to an endpoint that did not enable the type',
  );
});

t.test('never in live; an unknown type; a key without the scope', async (t) => {
  const live = await createKey(app, dev, 'live', 'read webhooks:write');
  const refused = await api(app, 'POST', '/api/v1/events/test', live, { type: 'listing.created' });
  t.equal(refused.status, 403);
  t.equal(refused.body.error.code, 'forbidden');
  t.match(refused.body.error.message, /sandbox only/);

  const unknown = await api(app, 'POST', '/api/v1/events/test', key, { type: 'ping' });
  t.equal(unknown.status, 400);
  t.match(unknown.body.error.details, [{ path: '/type' }]);

  const readOnly = await createKey(app, dev, 'sandbox', 'read');
  const scoped = await api(app, 'POST', '/api/v1/events/test', readOnly, {
    type: 'listing.created',
  });
  t.equal(scoped.status, 403);
});

t.test('endpoint_id: that endpoint only, if it is active and enabled the type', async (t) => {
  const before = receiver.to('/all').length;
  const only = await api(app, 'POST', '/api/v1/events/test', key, {
    type: 'listing.archived',
    endpoint_id: archivedOnly.id,
  });
  t.equal(only.status, 201);
  t.equal(only.body.data.deliveries, 1, 'one delivery');
  const eventId = only.body.data.event.event_id;
  await waitUntil('at /archived', async () =>
    receiver.to('/archived').some((r) => r.event?.event_id === eventId),
  );
  t.equal(receiver.to('/all').length, before, 'not to the other endpoint of the app');

  const notEnabled = await api(app, 'POST', '/api/v1/events/test', key, {
    type: 'listing.created',
    endpoint_id: archivedOnly.id,
  });
  t.equal(notEnabled.status, 400);
  t.match(notEnabled.body.error.details, [{ path: '/type' }]);

  const other = await createDeveloper(app);
  const foreign = await createEndpoint(app, receiver, { appId: other.appId, path: '/other' });
  for (const id of [foreign.id, '00000000-0000-4000-8000-000000000000']) {
    const res = await api(app, 'POST', '/api/v1/events/test', key, {
      type: 'listing.created',
      endpoint_id: id,
    });
    t.equal(res.status, 404, "another app's or no endpoint: 404");
  }
  await app.services.endpoints.disable(archivedOnly.id);
  const disabled = await api(app, 'POST', '/api/v1/events/test', key, {
    type: 'listing.archived',
    endpoint_id: archivedOnly.id,
  });
  t.equal(disabled.status, 409, 'a disabled endpoint: 409');
  t.equal(receiver.to('/other').length, 0);
});
