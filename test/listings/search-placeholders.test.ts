/**
 * A prepared search's statement is built once per shape with placeholders for its values
 * (src/listings/search-statement.ts withPlaceholders) and run with each search's values. For
 * every filter, scope, sort, source and cursor: the placeholder statement, its values bound, is
 * exactly the statement built from the values (same text, same parameters), and two searches of
 * one shape with different values share one text. Rendered by Drizzle's own dialect.
 */
import { isDeepStrictEqual } from 'node:util';
import { fillPlaceholders, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import t from 'tap';
import {
  DEFAULT_LIMITS,
  searchStatement,
  withPlaceholders,
  type SearchQuery,
} from '../../src/listings/search-statement.ts';
import type { SearchSort } from '../../src/listings/listing-cursor.ts';
import type { SearchFilters } from '../../src/listings/search-filters.ts';

const dialect = new PgDialect();
const rendered = (statement: SQL) => dialect.sqlToQuery(statement);
const FIRSTS = ['walk', 'gather', 'walk-only'] as const;
const SORTS: SearchSort[] = ['newest', 'price_asc', 'price_desc', 'updated_at', 'relevance'];
const SELLER = { kind: 'seller', sellerId: '0b7c1f7e-7d0e-4f57-9d2a-2a4f3c1e9b01' } as const;

/** Every filter, each with two values of one shape (lists of the same length). */
const FILTERS: [SearchFilters, SearchFilters][] = [
  [{ q: 'wool coat' }, { q: 'vintage' }],
  [{ category: 'Coats' }, { category: 'shoes' }],
  [{ condition: ['new', 'good'] }, { condition: ['fair', 'poor'] }],
  [{ tag: ['wool'] }, { tag: ['linen'] }],
  [{ brand: 'Barbour' }, { brand: 'No Such Brand' }],
  [{ size: 'M' }, { size: 'XXXL' }],
  [{ color: 'red' }, { color: 'chartreuse' }],
  [
    { minPriceCents: 100, maxPriceCents: 9000 },
    { minPriceCents: 0, maxPriceCents: 1 },
  ],
  [{ impactMode: true }, { impactMode: false }],
  [{ sellerUsername: 'seller_1' }, { sellerUsername: 'bench_crowded' }],
  [{ status: 'draft' }, { status: 'archived' }],
  [{ updatedSince: '2026-11-01T00:00:00.000Z' }, { updatedSince: '2020-01-01T00:00:00Z' }],
  [
    { q: 'jacket', size: 'M', color: 'green', tag: ['wax', 'cotton'], impactMode: true },
    { q: 'scarf', size: 'S', color: 'blue', tag: ['silk', 'wool'], impactMode: false },
  ],
];

function queries(filters: SearchFilters, n: number): SearchQuery[] {
  return SORTS.flatMap((sort) =>
    [
      { kind: 'public' } as const,
      { ...SELLER, environment: n ? 'sandbox' : 'live' } as const,
    ].flatMap((scope) => [
      { scope, filters, sort, limit: 24 },
      {
        scope,
        filters,
        sort,
        limit: 24,
        after: {
          publishedAt: `2026-11-2${n}T10:00:00.000001Z`,
          priceCents: 1000 + n,
          updatedAt: `2026-11-2${n}T11:00:00.000002Z`,
          id: `0b7c1f7e-7d0e-4f57-9d2a-2a4f3c1e9b0${n}`,
          rank: `0.0${n + 1}`,
        },
        ...(sort === 'relevance' ? { publishedBy: `2026-11-2${n}T12:00:00Z` } : {}),
      },
    ]),
  );
}

// One assertion per filter, over all its cases (each a list of what differs, empty when all
// agree): the same comparisons as one test point each, without 3,000 points of output.
for (const [index, pair] of FILTERS.entries()) {
  t.test(`filters ${JSON.stringify(pair[0])}`, async (t) => {
    const [one, other] = pair.map((filters, n) => queries(filters, n));
    const differences: string[] = [];
    let cases = 0;
    for (const [i, query] of one!.entries()) {
      for (const first of FIRSTS) {
        cases += 1;
        const direct = rendered(searchStatement(query, DEFAULT_LIMITS, first));
        const bound = withPlaceholders(query);
        const shaped = rendered(searchStatement(bound.query, DEFAULT_LIMITS, first));
        const name = `#${index} ${query.sort} ${query.scope.kind}${query.after ? ' after' : ''} ${first}`;
        if (shaped.sql !== direct.sql) differences.push(`${name}: not the same text`);
        if (!isDeepStrictEqual(fillPlaceholders(shaped.params, bound.values), direct.params))
          differences.push(`${name}: not the same values`);
        const again = withPlaceholders(other![i]!);
        if (rendered(searchStatement(again.query, DEFAULT_LIMITS, first)).sql !== shaped.sql)
          differences.push(`${name}: other values of the shape do not share its text`);
        if (isDeepStrictEqual(again.values, bound.values))
          differences.push(`${name}: other values of the shape bind the same values`);
      }
    }
    t.same(
      differences,
      [],
      `${cases} cases: the same text and values, and other values share the text only`,
    );
  });
}
