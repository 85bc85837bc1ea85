/**
 * The plans of search pages (OpenAPI "Search and sync", docs/performance.md "Search"): every
 * order and filter runs on an index, and a page reads a bounded number of rows, on whichever
 * database the suite runs (PGlite or PostgreSQL). The repository's own statements are run under
 * EXPLAIN ANALYZE, so the test follows the SQL as it evolves.
 *
 * The bound, with `limit` the page size, s the share of the scope's rows that the filters keep
 * and m the number of rows that match `q`:
 *   - an order without `q`: at most 3 x (limit + 1) / s rows (an ordered index scan, stopped
 *     by the limit);
 *   - with `q`, under an order of its own: the walk of that order, at most min((limit + 1) / s,
 *     WALK_ROWS) rows, and only when the walk found too few matches, the word's m matches
 *     through the text index: at most 3 x min((limit + 1) / s, WALK_ROWS + m), whatever the
 *     planner estimates;
 *   - relevance: at most 3 x min(1,000 / s, m) (the rescoring window's newest matches, through
 *     the ordered scan or the text index, whichever the planner finds cheaper).
 */
import { sql, type SQL } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import {
  ListingsSearchRepository,
  WALK_ROWS,
  walkOutcome,
  type SearchQuery,
} from '../../src/listings/listings-search-repository.ts';
import { listingsApp } from './support.ts';

const app = await listingsApp(t);
const repository = new ListingsSearchRepository(app.db);
const TOTAL = 8000;
const LIMIT = 24;

// 40 sellers; 8,000 live active listings with a vocabulary whose words have known shares, and
// every seller's drafts, archived and sandbox listings besides.
const sellers = await queryRows<{ id: string; username: string }>(
  app.db,
  sql`insert into users (username, display_name, password_hash)
      select 'plan_seller_' || i, 'Plan ' || i, 'not-a-hash' from generate_series(1, 40) as i
      returning id, username`,
);
const sellerIds = JSON.stringify(sellers.map((s) => s.id));
await app.db.execute(sql`
  insert into listings (seller_id, environment, status, title, description, category, brand,
    condition, tags, price_cents, published_at, created_at, updated_at)
  select (${sellerIds}::jsonb ->> (i % 40))::uuid, 'live', 'active',
    concat_ws(' ',
      case when i % 3 = 0 then 'shirt' end,
      case when i % 10 = 1 then 'jacket' end,
      case when i % 500 = 7 then 'tuxedo' end,
      'item', i),
    'A described item', (array['Tops','Outerwear','Shoes','Bottoms','Dresses'])[1 + i % 5],
    'Brand ' || (i % 50), (array['new_with_tags','good','fair','poor'])[1 + i % 4],
    array['tag' || (i % 30)], 100 + (i * 7919) % 50000,
    now() - interval '3 days' + i * interval '1 millisecond',
    now() - interval '3 days', now() - interval '2 days' + i * interval '1 second'
  from generate_series(1, ${TOTAL}) as i`);
await app.db.execute(sql`
  insert into listings (seller_id, environment, status, title, price_cents, published_at)
  select (${sellerIds}::jsonb ->> (i % 40))::uuid, case when i % 2 = 0 then 'live' else 'sandbox' end,
    (array['draft','archived'])[1 + i % 2], 'shirt draft ' || i, 500,
    now() - interval '4 days' + i * interval '1 millisecond'
  from generate_series(1, 2000) as i`);
// VACUUM too: it moves the text index's pending list (GIN fastupdate) into the index proper, as
// autovacuum does on a server; a pending list of 10,000 fresh rows makes the index look dear.
await app.db.execute(sql`vacuum analyze listings`);
await app.db.execute(sql`analyze users`);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function nodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)];
}

/** The rows a statement read from `listings`, and its plan's nodes. */
async function explain(statement: SQL): Promise<{ read: number; all: PlanNode[] }> {
  const [row] = await queryRows<Record<string, unknown>>(
    app.db,
    sql`explain (analyze, format json) ${statement}`,
  );
  const json = Object.values(row!)[0];
  const plan = (typeof json === 'string' ? JSON.parse(json) : json) as { Plan: PlanNode }[];
  const all = nodes(plan[0]!.Plan);
  const read = all
    .filter((n) => n['Relation Name'] === 'listings')
    .reduce(
      (sum, n) =>
        sum +
        (n['Actual Rows'] +
          (n['Rows Removed by Filter'] ?? 0) +
          (n['Rows Removed by Index Recheck'] ?? 0)) *
          n['Actual Loops'],
      0,
    );
  return { read, all };
}

/**
 * The rows a page read, as the repository runs it: its statement, or a keyword page's walk and,
 * when the walk found too few matches, its text-index statement.
 */
async function pageRead(query: SearchQuery): Promise<{ read: number; all: PlanNode[] }> {
  const statements = repository.statements(query);
  if ('page' in statements) return explain(statements.page);
  const walk = await explain(statements.walk);
  const walked = await queryRows<{ hit: boolean; walk_rn: number }>(app.db, statements.walk);
  if (walkOutcome(walked, query.limit) !== 'cut-off') return walk;
  const matches = await explain(statements.matches);
  return { read: walk.read + matches.read, all: [...walk.all, ...matches.all] };
}

const PUBLIC = { kind: 'public' } as const;
const share = (n: number) => n / TOTAL;

interface Case {
  name: string;
  query: Omit<SearchQuery, 'limit'>;
  /** The share of the scope's rows the filters keep. */
  s: number;
  /** Rows matching q (no q: undefined). */
  m?: number;
  /** An index the plan must use, when the order has one of its own. */
  index?: string;
  /**
   * The index holds exactly the rows that match, few of them: the planner may fetch them all
   * and sort (rows read are still those matches).
   */
  fewMatches?: boolean;
}

const cases: Case[] = [
  {
    name: 'newest, a common word',
    query: { scope: PUBLIC, filters: { q: 'shirt' }, sort: 'newest' },
    s: 1 / 3,
    m: TOTAL / 3,
  },
  {
    name: 'newest, a rare word',
    query: { scope: PUBLIC, filters: { q: 'tuxedo' }, sort: 'newest' },
    s: share(16),
    m: 16,
  },
  {
    name: 'newest, a word and two filters',
    query: {
      scope: PUBLIC,
      filters: { q: 'jacket', category: 'outerwear', condition: ['good'] },
      sort: 'newest',
    },
    s: 0.1 * 0.2 * 0.25,
    m: TOTAL / 10,
  },
  {
    name: 'relevance, a common word',
    query: { scope: PUBLIC, filters: { q: 'shirt' }, sort: 'relevance' },
    s: 1 / 3,
    m: TOTAL / 3,
  },
  {
    name: 'relevance, a rare word',
    query: { scope: PUBLIC, filters: { q: 'tuxedo' }, sort: 'relevance' },
    s: share(16),
    m: 16,
  },
  {
    name: 'price_asc, a price range',
    query: {
      scope: PUBLIC,
      filters: { minPriceCents: 10000, maxPriceCents: 20000 },
      sort: 'price_asc',
    },
    s: 0.2,
    index: 'listings_public_price_idx',
  },
  {
    name: 'price_desc',
    query: { scope: PUBLIC, filters: {}, sort: 'price_desc' },
    s: 1,
    index: 'listings_public_price_idx',
  },
  {
    name: 'price_asc after a cursor',
    query: {
      scope: PUBLIC,
      filters: {},
      sort: 'price_asc',
      after: { priceCents: 25000, publishedAt: '2000-01-01T00:00:00Z' },
    },
    s: 1,
    index: 'listings_public_price_idx',
  },
  {
    name: 'updated_at, since an instant',
    query: {
      scope: PUBLIC,
      filters: { updatedSince: new Date(Date.now() - 47 * 3600_000).toISOString() },
      sort: 'updated_at',
    },
    s: 1,
    index: 'listings_public_updated_idx',
  },
  {
    name: 'a category',
    query: { scope: PUBLIC, filters: { category: 'Shoes' }, sort: 'newest' },
    s: 0.2,
    index: 'listings_public_category_idx',
  },
  {
    name: 'a brand',
    query: { scope: PUBLIC, filters: { brand: 'brand 7' }, sort: 'newest' },
    s: 0.02,
    index: 'listings_public_brand_idx',
  },
  {
    name: 'a seller by username',
    query: { scope: PUBLIC, filters: { sellerUsername: 'plan_seller_9' }, sort: 'newest' },
    s: 1,
    index: 'listings_seller_status_feed_idx',
  },
  {
    name: 'the owner view, drafts',
    query: {
      scope: { kind: 'seller', sellerId: sellers[10]!.id, environment: 'live' },
      filters: { status: 'draft' },
      sort: 'newest',
    },
    s: 25 / 225,
    index: 'listings_seller_status_feed_idx',
    fewMatches: true,
  },
  {
    name: "the owner's sync",
    query: {
      scope: { kind: 'seller', sellerId: sellers[9]!.id, environment: 'live' },
      filters: { updatedSince: '2000-01-01T00:00:00Z' },
      sort: 'updated_at',
    },
    s: 1,
    index: 'listings_seller_updated_idx',
  },
];

for (const c of cases) {
  t.test(`${c.name}: on an index, rows read bounded`, async (t) => {
    const { read, all } = await pageRead({ ...c.query, limit: LIMIT });
    const relevance = c.query.sort === 'relevance';
    const ordered = (relevance ? 1000 : LIMIT + 1) / c.s;
    const other = c.m === undefined ? ordered : relevance ? c.m : WALK_ROWS + c.m;
    const bound = Math.ceil(3 * Math.min(ordered, other) + 3 * LIMIT);
    const shape = all.map(
      (n) => `${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : ''}`,
    );
    t.ok(read <= bound, `${read} rows read, bound ${bound}: ${shape.join(' / ')}`);
    t.notOk(
      all.some((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'listings'),
      'no sequential scan of listings',
    );
    if (c.index)
      t.ok(
        all.some((n) => n['Index Name'] === c.index),
        `uses ${c.index}: ${shape.join(' / ')}`,
      );
    if (c.query.sort !== 'relevance' && c.m === undefined && !c.fewMatches)
      t.notOk(
        all.some((n) => n['Node Type'] === 'Sort'),
        `the index gives the order, no sort: ${shape.join(' / ')}`,
      );
  });
}

t.test('a rare word past the walk pages through the text index, every match once', async (t) => {
  // 16 matches among 8,000: the walk of the first WALK_ROWS rows finds too few for a page.
  // Twice: the second pass finds the search remembered as sparse and asks the text index at
  // once; either way the same pages.
  const passes: string[][] = [];
  for (const sort of ['newest', 'price_asc', 'updated_at', 'newest'] as const) {
    const seen: { id: string; title: string }[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 20; page += 1) {
      const after: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const res = await app.inject(`/api/v1/listings?q=tuxedo&sort=${sort}&limit=5${after}`);
      const body = res.json();
      seen.push(...body.data);
      cursor = body.meta.next_cursor;
      if (cursor === null) break;
    }
    t.equal(seen.length, 16, `${sort}: 16 matches`);
    t.equal(new Set(seen.map((l) => l.id)).size, 16, `${sort}: each once`);
    t.ok(
      seen.every((l) => l.title.includes('tuxedo')),
      `${sort}: matches only`,
    );
    passes.push(seen.map((l) => l.id));
  }
  t.same(passes[3], passes[0], 'the remembered path pages the same listings in the same order');
});
