/**
 * The SDK's savedSearches (sdk/src/client.ts) against the running server over real HTTP: create,
 * a page, every page by iteration, get and delete, typed from the document; the server's
 * refusals arrive as MarketplaceApiError with their codes.
 */
import t from 'tap';
import {
  apiKeyAuth,
  createMarketplaceClient,
  type SavedSearch,
  type SavedSearchCreate,
} from '../../sdk/src/index.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { rejection } from './support.ts';

const { app, baseUrl } = await listeningApp(t);
const developer = await createDeveloper(app);
const api = createMarketplaceClient({
  baseUrl,
  auth: apiKeyAuth(await createKey(app, developer, 'sandbox', 'read searches')),
});

const saved: SavedSearch[] = [];

t.test('create: the saved search as the server stored it', async (t) => {
  const bodies: SavedSearchCreate[] = [
    { name: 'Jackets', q: 'jacket' },
    { name: 'Barbour in M', q: 'jacket', brand: 'Barbour', size: 'M', max_price_cents: 8000 },
    { name: 'Vintage tags', tag: ['vintage', 'denim'], condition: ['good'] },
  ];
  for (const body of bodies) {
    const created = await api.savedSearches.create(body);
    t.equal(created.meta.environment, 'sandbox');
    saved.push(created.data);
  }
  t.match(saved[1], {
    name: 'Barbour in M',
    q: 'jacket',
    brand: 'Barbour',
    size: 'M',
    max_price_cents: 8000,
    last_matched_at: null,
  });
  t.same(saved[2]!.tag, ['denim', 'vintage'], 'tags as stored: sorted');
  const refused = await rejection(
    t,
    api.savedSearches.create({ name: 'Cheap', max_price_cents: 1 }),
  );
  t.equal(refused.status, 400);
  t.equal(refused.code, 'validation_error');
});

t.test('list is one page; iterate follows next_cursor through every page', async (t) => {
  const newestFirst = saved.map((s) => s.id).reverse();
  const first = await api.savedSearches.list({ limit: 2 });
  t.same(
    first.data.map((s) => s.id),
    newestFirst.slice(0, 2),
  );
  t.type(first.meta.next_cursor, 'string');
  const all: string[] = [];
  for await (const search of api.savedSearches.iterate({ limit: 1 })) all.push(search.id);
  t.same(all, newestFirst, 'each once, newest first, one per page');
  const pages = [];
  for await (const page of api.savedSearches.pages({ limit: 2 })) pages.push(page.data.length);
  t.same(pages, [2, 1]);
});

t.test('get, then delete: gone for get and for a second delete', async (t) => {
  const [target] = saved;
  t.same((await api.savedSearches.get(target!.id)).data, target);
  t.equal(await api.savedSearches.delete(target!.id), undefined, '204: nothing to return');
  t.equal((await rejection(t, api.savedSearches.get(target!.id))).code, 'not_found');
  const again = await rejection(t, api.savedSearches.delete(target!.id));
  t.equal(again.status, 404);
  const left: string[] = [];
  for await (const search of api.savedSearches.iterate()) left.push(search.id);
  t.notOk(left.includes(target!.id));
  t.equal(left.length, 2);
});

t.test('a key without the searches scope is refused', async (t) => {
  const reader = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(await createKey(app, developer, 'sandbox', 'read')),
  });
  const error = await rejection(t, reader.savedSearches.list());
  t.equal(error.status, 403);
  t.equal(error.code, 'forbidden');
});
