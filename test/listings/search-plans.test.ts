/**
 * The bound of every search page (OpenAPI "Search and sync", src/listings/search-statement.ts):
 * for each sort and each filter, with a common value, a rare one and one that
 * matches nothing, the page's one statement reads at most
 *   walkRows + 1 (the walk) + gatherRows + 1 (the matches gathered) + 3 x (limit + 2) (the page's
 *   rows and its seller), plus the relevance window's rows when ranked,
 * whatever the planner's statistics say: the table is analyzed while empty, then filled, and
 * the cases run before and after a VACUUM ANALYZE, each planned for its values and as a
 * prepared statement's generic plan (first pages and later ones), each statement shape once per
 * condition (checkBounds says which values each meets). The repository runs with small
 * bounds (walk and gathering of 300 rows) on 10,000 listings, so a plan that reads the table
 * fails. Its own statements run under EXPLAIN ANALYZE, on whichever database the suite runs
 * (PGlite or PostgreSQL).
 */
import { sql, type SQL } from 'drizzle-orm';
import t, { type Test } from 'tap';
import { queryRows, render } from '../../src/db/rows.ts';
import {
  ListingsSearchRepository,
  mayPrepare,
} from '../../src/listings/listings-search-repository.ts';
import type { SearchFilters } from '../../src/listings/search-filters.ts';
import type { SearchSort, SortKey } from '../../src/listings/listing-cursor.ts';
import type { SearchQuery } from '../../src/listings/search-statement.ts';
import { explainPrepared, jsonPlan, planNodes, type PlanNode } from '../helpers/explaining.ts';
import { listingsApp } from './support.ts';

const app = await listingsApp(t);
const BOUNDS = { walkRows: 300, gatherRows: 300 };
const repository = new ListingsSearchRepository(app.db, BOUNDS);
const TOTAL = 8000;
const LIMIT = 24;
const DAY = 86_400_000;
const RELEVANCE_WINDOW = 1000;

// As a production table looks after a large import between autovacuum's analyses: the
// statistics say it is empty.
await app.db.execute(sql`analyze listings`);
await app.db.execute(sql`analyze users`);
const sellers = await queryRows<{ id: string; username: string }>(
  app.db,
  sql`insert into users (username, display_name, password_hash)
      select 'plan_seller_' || i, 'Plan ' || i, 'not-a-hash' from generate_series(1, 40) as i
      returning id, username`,
);
const sellerIds = JSON.stringify(sellers.map((s) => s.id));
// 8,000 live active listings: common values (a third, a fifth...), rare ones (a few in the
// oldest rows only, past any walk of the newest), and the drafts, archived and sandbox listings
// of every seller besides.
await app.db.execute(sql`
  insert into listings (seller_id, environment, status, title, description, category, brand,
    size, color, condition, tags, impact_mode, price_cents, published_at, created_at, updated_at)
  select (${sellerIds}::jsonb ->> (i % 40))::uuid, 'live', 'active',
    concat_ws(' ',
      case when i % 3 = 0 then 'shirt' end,
      case when i < 400 and i % 25 = 0 then 'tuxedo' end,
      'item', i),
    'A described item', (array['Tops','Outerwear','Shoes','Bottoms','Dresses'])[1 + i % 5],
    case when i < 400 and i % 20 = 0 then 'Rare Brand' else 'Brand ' || (i % 50) end,
    case when i < 400 and i % 20 = 0 then 'xxl' else (array['xs','s','m','l','xl'])[1 + i % 5] end,
    case when i < 400 and i % 20 = 0 then 'gold' else (array['red','blue','black'])[1 + i % 3] end,
    case when i < 400 and i % 20 = 0 then 'like_new'
      else (array['new_with_tags','good','fair','poor'])[1 + i % 4] end,
    array['tag' || (i % 30)] || case when i < 400 and i % 20 = 0 then array['raretag'] else '{}' end,
    i < 400 and i % 20 = 0, 100 + (i * 7919) % 50000,
    now() - interval '3 days' + i * interval '1 millisecond',
    now() - interval '3 days', now() - interval '2 days' + i * interval '1 second'
  from generate_series(1, ${TOTAL}) as i`);
await app.db.execute(sql`
  insert into listings (seller_id, environment, status, title, price_cents, published_at)
  select (${sellerIds}::jsonb ->> (i % 40))::uuid, case when i % 2 = 0 then 'live' else 'sandbox' end,
    (array['draft','archived'])[1 + i % 2], 'shirt draft ' || i, 500,
    now() - interval '4 days' + i * interval '1 millisecond'
  from generate_series(1, 2000) as i`);

/** A statement's plan nodes and the rows it read from `listings`: planned for its values. */
async function explain(
  statement: SQL,
  planned: 'custom' | 'generic' = 'custom',
): Promise<{ read: number; all: PlanNode[] }> {
  const plan =
    planned === 'generic'
      ? await app.db.transaction((tx) =>
          explainPrepared(tx, render(statement), 'force_generic_plan'),
        )
      : jsonPlan(await app.db.execute(sql`explain (analyze, format json) ${statement}`));
  const all = planNodes(plan);
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

const PUBLIC = { kind: 'public' } as const;
const SORTS: SearchSort[] = ['newest', 'price_asc', 'price_desc', 'updated_at', 'relevance'];

/** Each filter with a common value, a rare one (only among the oldest rows) and none. */
const FILTERS: [string, SearchFilters, SearchFilters, SearchFilters][] = [
  ['q', { q: 'shirt' }, { q: 'tuxedo' }, { q: 'nosuchword' }],
  ['category', { category: 'shoes' }, { category: 'Shoes' }, { category: 'Hats' }],
  ['brand', { brand: 'brand 7' }, { brand: 'rare brand' }, { brand: 'nosuchbrand' }],
  ['size', { size: 'M' }, { size: 'xxl' }, { size: 'zz' }],
  ['color', { color: 'red' }, { color: 'gold' }, { color: 'zz' }],
  ['condition', { condition: ['good'] }, { condition: ['like_new'] }, { condition: ['excellent'] }],
  ['tag', { tag: ['tag7'] }, { tag: ['raretag'] }, { tag: ['nosuchtag'] }],
  ['impact_mode', { impactMode: false }, { impactMode: true }, { impactMode: true, size: 'm' }],
  [
    'seller',
    { sellerUsername: 'plan_seller_9' },
    { sellerUsername: 'plan_seller_9', size: 'xxl' },
    { sellerUsername: 'nobody' },
  ],
  [
    'price range',
    { minPriceCents: 10000, maxPriceCents: 20000 },
    { minPriceCents: 100, maxPriceCents: 110 },
    { minPriceCents: 90000 },
  ],
  [
    'updated since',
    { updatedSince: new Date(Date.now() - 3 * DAY).toISOString() },
    { updatedSince: new Date(Date.now() - 2 * DAY + (TOTAL - 100) * 1000).toISOString() },
    { updatedSince: new Date(Date.now() + DAY).toISOString() },
  ],
  [
    'a combination',
    { size: 'm', color: 'red' },
    { size: 'xxl', color: 'gold', tag: ['raretag'] },
    { size: 'm', color: 'gold', brand: 'brand 7' },
  ],
];

/** The most rows a page may read: the walk, the gathering and the page's own rows. */
function bound(sort: SearchSort): number {
  const page = 3 * (LIMIT + 2);
  const window = sort === 'relevance' ? 2 * RELEVANCE_WINDOW : 0;
  return BOUNDS.walkRows + 1 + 2 * (BOUNDS.gatherRows + 1) + page + window;
}

/** A later page's cursor for each sort: the sort key of a row in the middle of the feed. */
async function middleKeys(): Promise<Record<SearchSort, SortKey> & { publishedBy: string }> {
  const [row] = await queryRows<{ p: string; c: number; u: string; id: string; top: string }>(
    app.db,
    sql`select published_at::text as p, price_cents as c, updated_at::text as u, id::text as id,
          (select max(published_at)::text from listings) as top
        from listings where environment = 'live' and status = 'active'
        order by published_at desc offset ${TOTAL / 2} limit 1`,
  );
  const { p, c, u, id, top } = row!;
  return {
    newest: { publishedAt: p },
    price_asc: { priceCents: c, publishedAt: p },
    price_desc: { priceCents: c, publishedAt: p },
    updated_at: { updatedAt: u, id },
    relevance: { rank: '0.05', publishedAt: p },
    publishedBy: top,
  };
}

/**
 * Each statement shape (sort, filter, page, source first: what the text depends on, the
 * repository's shapeOf) once per planner condition, with values where the planner plans for
 * them: a custom plan on analyzed statistics (`values: 'all'`) is checked with each of the
 * common, rare and absent values, since the statistics let each value choose its plan. A
 * generic plan is one plan for every value of its text (PostgreSQL plans the prepared statement
 * without them), and on statistics that say the table is empty the planner has no histogram or
 * common values to tell one value from another: there each shape runs once, its value turning
 * common, rare, none from one shape to the next, so every filter and every sort still meets each
 * kind of value in every condition. (The matrix once ran every value everywhere: about 2,000
 * EXPLAIN ANALYZE, most of them the same plan again.)
 */
async function checkBounds(
  t: Test,
  label: string,
  plan: 'custom' | 'generic',
  values: 'all' | 'one per shape',
) {
  const keys = plan === 'generic' ? await middleKeys() : undefined;
  const problems: string[] = [];
  let statements = 0;
  for (const [s, sort] of SORTS.entries())
    for (const [f, [name, ...filterValues]] of FILTERS.entries()) {
      const firstPage = (filters: SearchFilters): SearchQuery => ({
        scope: PUBLIC,
        sort,
        limit: LIMIT,
        filters:
          sort === 'relevance' && filters.q === undefined ? { ...filters, q: 'item' } : filters,
      });
      const pages: [string, (filters: SearchFilters) => SearchQuery][] = [
        ['first page', firstPage],
      ];
      if (keys)
        pages.push([
          'a later page',
          (filters) => ({
            ...firstPage(filters),
            after: keys[sort],
            ...(sort === 'relevance' ? { publishedBy: keys.publishedBy } : {}),
          }),
        ]);
      for (const [p, [page, query]] of pages.entries())
        for (const [w, first] of (['walk', 'gather'] as const).entries()) {
          const which = values === 'all' ? [0, 1, 2] : [(s + f + p + w) % 3];
          for (const v of which) {
            const built = query(filterValues[v]!);
            // The repository plans these per run, never generically (mayPrepare).
            if (plan === 'generic' && !mayPrepare(built)) continue;
            statements += 1;
            problems.push(
              ...(await checkStatement(
                `${label}, ${plan} plan: ${sort}, ${name} ${['common', 'rare', 'none'][v]}, ${page}, ${first} first`,
                sort,
                repository.statement(built, first),
                plan,
              )),
            );
          }
        }
    }
  t.same(problems, [], `${label}, ${plan} plans: ${statements} statements, each within its bound`);
}

/**
 * What is wrong with a page's statement (nothing: an empty list): it reads at most its bound,
 * without a sequential scan of listings, and gathers at most the gathering's bound.
 */
async function checkStatement(
  title: string,
  sort: SearchSort,
  statement: SQL,
  plan: 'custom' | 'generic',
): Promise<string[]> {
  const { read, all } = await explain(statement, plan);
  const shape = all
    .map((n) => `${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : ''}`)
    .join(' / ');
  const problems: string[] = [];
  if (read > bound(sort))
    problems.push(`${title}: ${read} rows read, bound ${bound(sort)}: ${shape}`);
  if (all.some((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'listings'))
    problems.push(`${title}: a sequential scan of listings: ${shape}`);
  const gathered = all.find((n) => n['Function Name'] === 'listings_matching');
  if (gathered && gathered['Actual Rows'] > BOUNDS.gatherRows + 1)
    problems.push(`${title}: gathered ${gathered['Actual Rows']}`);
  return problems;
}

t.test(
  'every filter under every sort reads a bounded number of rows, never analyzed',
  async (t) => {
    await checkBounds(t, 'stale statistics', 'custom', 'one per shape');
    await checkBounds(t, 'stale statistics', 'generic', 'one per shape');
  },
);

t.test('the same once analyzed', async (t) => {
  await app.db.execute(sql`vacuum analyze listings`);
  await checkBounds(t, 'analyzed', 'custom', 'all');
  await checkBounds(t, 'analyzed', 'generic', 'one per shape');
});

t.test('the gathering is the GIN index, whatever the statistics', async (t) => {
  // What listings_matching runs, with its own setting (drizzle/0013): sequential scans off.
  const token = (text: string) => `quote_literal(${text})::tsquery`;
  for (const [name, q, most] of [
    ['a token that matches nothing', token(`'size:' || md5('zz')`), 0],
    [
      'a common token and a rare one',
      `${token(`'size:' || md5('xxl')`)} && ${token(`'tag:' || md5('raretag')`)}`,
      19,
    ],
    ['a common token, capped', token(`'size:' || md5('m')`), 301],
  ] as const) {
    const rows = await queryRows<Record<string, unknown>>(
      app.db,
      sql`select * from listings_matching(${sql.raw(q)}, 301)`,
    );
    t.equal(rows.length, most, `${name}: ${rows.length} ids`);
  }
  await app.db.transaction(async (tx) => {
    await tx.execute(sql`set local enable_seqscan = off`);
    const plan = jsonPlan(
      await tx.execute(sql`explain (format json) select id from listings
          where match @@ quote_literal('size:' || md5('zz'))::tsquery limit 301`),
    );
    t.ok(
      planNodes(plan).some((n) => n['Index Name'] === 'listings_match_idx'),
      'a bitmap scan of listings_match_idx',
    );
  });
});

/** Pages a search at the repository with the small bounds, as the read service pages it. */
async function pageAll(filters: SearchFilters, sort: Exclude<SearchSort, 'relevance'>) {
  const seen: string[] = [];
  let after: SortKey | undefined;
  let pages = 0;
  let short = 0;
  for (;;) {
    pages += 1;
    const found = await repository.page({ scope: PUBLIC, filters, sort, limit: 10, after });
    const page = found.rows.slice(0, 10);
    seen.push(...page.map((row) => row.id));
    const last = found.rows.length > 10 ? page[page.length - 1] : found.resumeAfter;
    if (found.resumeAfter) short += 1;
    if (!last) break;
    after =
      sort === 'newest'
        ? { publishedAt: last.published_at }
        : sort === 'updated_at'
          ? { updatedAt: last.updated_at, id: last.id }
          : { priceCents: last.price_cents, publishedAt: last.published_at };
    if (pages > 200) throw new Error('did not end');
  }
  return { seen, pages, short };
}

t.test('a search too sparse to walk and too common to gather pages in short pages', async (t) => {
  // 400 matches, only among the oldest 1,000 of 8,000 rows: the walk of the newest 300 finds
  // none, and 400 are more than the 300 gathered at most.
  await app.db.execute(sql`
    update listings set color = 'teal' where environment = 'live' and status = 'active'
      and substring(title from ' ([0-9]+)$')::int between 400 and 799`);
  for (const sort of ['newest', 'price_asc', 'updated_at'] as const) {
    const { seen, pages, short } = await pageAll({ color: 'teal' }, sort);
    const [expected] = await queryRows<{ n: number | string }>(
      app.db,
      sql`select count(*) as n from listings
          where environment = 'live' and status = 'active' and color = 'teal'
            and updated_at < now() - interval '5 seconds'`,
    );
    t.equal(seen.length, Number(expected!.n), `${sort}: every match (${pages} pages)`);
    t.equal(new Set(seen).size, seen.length, `${sort}: each once`);
    // By price the teal listings are spread through the order: the walk finds them.
    if (sort !== 'price_asc') t.ok(short > 0, `${sort}: ${short} short pages whose cursor went on`);
  }
  // A rare value is gathered whole: full pages, no short one.
  const rare = await pageAll({ size: 'xxl' }, 'newest');
  t.equal(rare.seen.length, 19, 'the 19 rare listings');
  t.equal(rare.short, 0, 'gathered: no short page');
  // A value that matches nothing: one empty page, no cursor.
  const none = await pageAll({ size: 'zz' }, 'price_asc');
  t.same([none.seen.length, none.pages], [0, 1], 'nothing: one empty page');
});
