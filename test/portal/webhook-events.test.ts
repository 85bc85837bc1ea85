/**
 * The webhooks pages' event types (enabled_events) and deletion: the create form's checkboxes
 * (every type ticked by default), the endpoint page's settings form (URL and events, shown again
 * as sent after a refusal), and Delete; each through EndpointsService, in its words. Another
 * app's endpoint cannot be edited or deleted.
 */
import t from 'tap';
import { alertOf, appWithLog, createApp, noticeOf, signUp } from './support.ts';

const { app } = await appWithLog(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
const owner = await signUp(app);
const appId = await createApp(owner, 'Events app');
const hooksUrl = `/portal/apps/${appId}/webhooks`;
const URL_A = 'https://93.184.215.14/a';

const endpointOf = async (url: string) =>
  (await app.services.endpoints.list(appId)).find((e) => e.url === url)!;

t.test('the create form: accessible checkboxes, every type by default', async (t) => {
  const page = await owner.browser.get(hooksUrl);
  t.match(
    page.body,
    /<fieldset aria-describedby="new-endpoint-events-hint">\n<legend>Events to send<\/legend>/,
  );
  for (const type of [
    '*',
    'listing.created',
    'listing.updated',
    'listing.archived',
    'listing.matched',
  ])
    t.match(
      page.body,
      new RegExp(
        `<label class="choice"><input type="checkbox" name="events" value="${type.replace('.', '\\.').replace('*', '\\*')}"`,
      ),
      `a labelled box for ${type}`,
    );
  t.match(page.body, /value="\*" checked>/, '"every type" ticked');
  t.notMatch(page.body, /value="listing\.created" checked>/);

  const none = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: URL_A,
    events_shown: '1',
  });
  t.equal(none.statusCode, 400, 'nothing ticked is refused');
  t.match(alertOf(none.body), /Choose at least one event type/);
  t.notMatch(none.body, /value="\*" checked>/, 'the form shows what was sent');

  const both = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: URL_A,
    events_shown: '1',
    events: ['*', 'listing.created'],
  });
  t.equal(both.statusCode, 400);
  t.match(alertOf(both.body), /stands for every event type/);

  const made = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: URL_A,
    events_shown: '1',
    events: ['listing.archived', 'listing.created'],
  });
  t.equal(made.statusCode, 201);
  t.match(made.body, /<td><code>listing\.created<\/code>, <code>listing\.archived<\/code><\/td>/);
  t.same((await endpointOf(URL_A)).enabled_events, ['listing.created', 'listing.archived']);

  const plain = await owner.browser.act(hooksUrl, hooksUrl, {
    env: 'sandbox',
    url: 'https://93.184.215.14/b',
  });
  t.equal(plain.statusCode, 201, 'a post without the fieldset gets the default');
  t.same((await endpointOf('https://93.184.215.14/b')).enabled_events, ['*']);
  t.match(plain.body, /<td>every event type<\/td>/);
});

t.test('the endpoint page: its events, and a settings form to change URL and events', async (t) => {
  const endpoint = await endpointOf(URL_A);
  const pageUrl = `${hooksUrl}/${endpoint.id}`;
  const page = await owner.browser.get(pageUrl);
  t.match(
    page.body,
    /<dt>Events<\/dt><dd><code>listing\.created<\/code>, <code>listing\.archived<\/code><\/dd>/,
  );
  t.match(page.body, /<label for="edit-endpoint-url">URL<\/label>/);
  t.match(page.body, /value="listing\.archived" checked>/);
  t.notMatch(page.body, /value="listing\.updated" checked>/);

  const refused = await owner.browser.act(pageUrl, `${pageUrl}/edit`, {
    url: 'http://93.184.215.14/plain',
    events_shown: '1',
    events: ['listing.updated'],
  });
  t.equal(refused.statusCode, 400);
  t.match(alertOf(refused.body), /https/);
  t.match(refused.body, /value="http:\/\/93\.184\.215\.14\/plain"/, 'the URL as sent');
  t.match(refused.body, /value="listing\.updated" checked>/, 'the events as sent');
  t.same(
    (await endpointOf(URL_A)).enabled_events,
    ['listing.created', 'listing.archived'],
    'unchanged',
  );

  const saved = await owner.browser.act(pageUrl, `${pageUrl}/edit`, {
    url: 'https://93.184.215.14/a2',
    events_shown: '1',
    events: ['listing.updated', 'listing.matched'],
  });
  t.equal(saved.statusCode, 303);
  t.equal(saved.headers.location, `${pageUrl}?done=updated`);
  const shown = await owner.browser.get(String(saved.headers.location));
  t.match(noticeOf(shown.body), /endpoint was updated/);
  t.match(await app.services.endpoints.details(endpoint.id), {
    url: 'https://93.184.215.14/a2',
    enabled_events: ['listing.updated', 'listing.matched'],
  });
});

t.test("delete; another app's endpoint cannot be changed or deleted", async (t) => {
  const endpoint = await endpointOf('https://93.184.215.14/a2');
  const pageUrl = `${hooksUrl}/${endpoint.id}`;

  const stranger = await signUp(app);
  const otherApp = await createApp(stranger, 'Not yours');
  const foreign = `/portal/apps/${otherApp}/webhooks/${endpoint.id}`;
  const edit = await stranger.browser.act(`/portal/apps/${otherApp}/webhooks`, `${foreign}/edit`, {
    url: 'https://93.184.215.14/mine',
  });
  t.equal(edit.statusCode, 404);
  const del = await stranger.browser.act(`/portal/apps/${otherApp}/webhooks`, `${foreign}/delete`);
  t.equal(del.statusCode, 404);

  const page = await owner.browser.get(pageUrl);
  t.match(
    page.body,
    /<button type="submit" class="danger" aria-label="Delete endpoint https:\/\/93\.184\.215\.14\/a2">Delete endpoint<\/button>/,
  );
  const deleted = await owner.browser.act(pageUrl, `${pageUrl}/delete`);
  t.equal(deleted.statusCode, 303);
  t.equal(deleted.headers.location, `${hooksUrl}?done=deleted`);
  const list = await owner.browser.get(String(deleted.headers.location));
  t.match(noticeOf(list.body), /endpoint was deleted/);
  t.notMatch(list.body, /93\.184\.215\.14\/a2/, 'no longer listed');
  t.equal((await owner.browser.get(pageUrl)).statusCode, 404, 'its page is gone');
});
