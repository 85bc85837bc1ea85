/**
 * One definition of "matches" (OpenAPI "Saved searches"): a property test. Random saved
 * searches and random listings, written and then edited through the API; once the matcher has
 * drained its queue, each saved search's current matches (saved_search_matches) are exactly
 * the listings GET /api/v1/listings returns for the same parameters to the same credential.
 * Seeded (test/helpers/seed.ts): the same cases on every run unless TEST_SEED says otherwise; a
 * failure names its seed (TEST_SEED=n reruns it).
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';
import { seed, seededRandom } from '../helpers/seed.ts';
import { drained, searcher } from './support.ts';

t.comment(`seed ${seed}`);
const random = seededRandom();
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const maybe = <T>(p: number, value: () => T): T | undefined => (random() < p ? value() : undefined);

const WORDS = ['jacket', 'coat', 'boots', 'denim', 'wool', 'leather', 'vintage', 'waxed', 'shirt'];
const BRANDS = ['Barbour', "Levi's", 'Patagonia', 'barbour'];
const SIZES = ['S', 'M', 'L', 'm'];
const COLORS = ['olive', 'blue', 'Black'];
const CATEGORIES = ['Outerwear', 'Jeans', 'outerwear'];
const CONDITIONS = ['new_with_tags', 'excellent', 'good', 'fair'] as const;
const TAGS = ['vintage', 'outdoor', 'denim'];

const app = await webhooksApp(t);
const alerts = await searcher(app);
const sellers = [await searcher(app), await searcher(app)];

function listingFields(): Json {
  return {
    title: `${pick(WORDS)} ${pick(WORDS)}`,
    description: maybe(0.5, () => `${pick(WORDS)} in fine shape`),
    brand: maybe(0.8, () => pick(BRANDS)),
    size: maybe(0.8, () => pick(SIZES)),
    color: maybe(0.6, () => pick(COLORS)),
    category: maybe(0.7, () => pick(CATEGORIES)),
    condition: pick(CONDITIONS),
    tags: [...new Set([maybe(0.5, () => pick(TAGS)), maybe(0.3, () => pick(TAGS))])].filter(
      (tag) => tag !== undefined,
    ),
    price_cents: 1000 + Math.floor(random() * 9000),
    impact_mode: random() < 0.3,
    status: random() < 0.8 ? 'active' : 'draft',
    cover_image_url: 'https://images.example.com/p.jpg',
  };
}

function searchFields(): Json {
  const q = pick([
    () => pick(WORDS),
    () => `${pick(WORDS)} ${pick(WORDS)}`,
    () => `${pick(WORDS)} -${pick(WORDS)}`,
    () => `${pick(WORDS)} or ${pick(WORDS)}`,
    () => undefined,
  ])();
  const min = maybe(0.3, () => 1000 + Math.floor(random() * 5000));
  return {
    q,
    brand: maybe(0.4, () => pick(BRANDS)),
    size: maybe(0.4, () => pick(SIZES)),
    color: maybe(0.2, () => pick(COLORS)),
    category: maybe(0.3, () => pick(CATEGORIES)),
    condition: maybe(0.3, () => [...new Set([pick(CONDITIONS), pick(CONDITIONS)])]),
    tag: maybe(0.2, () => [pick(TAGS)]),
    min_price_cents: min,
    max_price_cents: maybe(0.3, () => (min ?? 1000) + Math.floor(random() * 6000)),
    impact_mode: maybe(0.2, () => random() < 0.5),
    seller: maybe(0.2, () => pick(sellers).username),
  };
}

/** Every listing GET /listings returns for these parameters, all pages. */
async function searched(fields: Json): Promise<string[]> {
  const ids: string[] = [];
  const params = new URLSearchParams({ limit: '100' });
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) params.append(name, String(item));
  }
  for (;;) {
    const res = await api(app, 'GET', `/api/v1/listings?${params}`, alerts.live);
    if (res.status !== 200) throw new Error(`search ${params}: ${JSON.stringify(res.body)}`);
    ids.push(...res.body.data.map((listing: Json) => listing.id));
    if (res.body.meta.next_cursor === null) return ids.sort();
    params.set('cursor', res.body.meta.next_cursor);
  }
}

t.test(`the matcher's matches are the search's answers (seed ${seed})`, async (t) => {
  const saved: { id: string; fields: Json }[] = [];
  while (saved.length < 30) {
    const fields = searchFields();
    const res = await api(app, 'POST', '/api/v1/saved_searches', alerts.live, {
      name: 'property',
      ...fields,
    });
    if (res.status === 201) saved.push({ id: res.body.data.id, fields });
    else t.equal(res.status, 400, `refused, not failed: ${JSON.stringify(fields)}`);
  }
  const listings: { id: string; key: string }[] = [];
  for (let i = 0; i < 60; i += 1) {
    const seller = pick(sellers);
    const res = await api(app, 'POST', '/api/v1/listings', seller.live, listingFields());
    t.equal(res.status, 201);
    listings.push({ id: res.body.data.id, key: seller.live });
  }
  // Edits: into and out of matches, published, unpublished, archived.
  for (let i = 0; i < 30; i += 1) {
    const { id, key } = pick(listings);
    const change = pick([
      () => ({ price_cents: 1000 + Math.floor(random() * 9000) }),
      () => ({ size: pick(SIZES) }),
      () => ({ brand: pick(BRANDS) }),
      () => ({ title: `${pick(WORDS)} ${pick(WORDS)}` }),
      () => ({ status: pick(['active', 'draft']) }),
      () => null,
    ])();
    const res = change
      ? await api(app, 'PATCH', `/api/v1/listings/${id}`, key, change)
      : await api(app, 'DELETE', `/api/v1/listings/${id}`, key);
    t.ok(res.status === 200 || res.status === 409 || res.status === 404, `edit: ${res.status}`);
  }
  await drained(app);
  const rows = await queryRows<{ saved_search_id: string; listing_id: string }>(
    app.db,
    sql`select saved_search_id::text, listing_id::text from saved_search_matches`,
  );
  let compared = 0;
  for (const search of saved) {
    const matched = rows
      .filter((row) => row.saved_search_id === search.id)
      .map((row) => row.listing_id)
      .sort();
    const expected = await searched(search.fields);
    t.strictSame(matched, expected, JSON.stringify(search.fields));
    compared += expected.length;
  }
  t.ok(compared > 0, `some matches to compare (${compared})`);
});
