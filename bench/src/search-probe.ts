/**
 * What the search scenarios' req/s do not show (issue #30 item 7), measured on an idle server
 * after the rounds:
 *
 *  - latency: searches drawn from the seed's vocabulary (vocabulary.ts probeQueries), one after
 *    the other on a single connection, through the API;
 *  - rows read per page: EXPLAIN (ANALYZE, BUFFERS) of the repository's own statement for each
 *    sort, with a common and a rare word and for each search scenario, run as the API runs it
 *    (not prepared, so planned for its values).
 */
import http from 'node:http';
import postgres from 'postgres';
import type { Db } from '../../src/db/client.ts';
import { render } from '../../src/db/rows.ts';
import { ListingsSearchRepository } from '../../src/listings/listings-search-repository.ts';
import type { SearchFilters } from '../../src/listings/search-filters.ts';
import type { SearchSort } from '../../src/listings/listing-cursor.ts';
import type { SearchQuery } from '../../src/listings/search-statement.ts';
import type { SearchPlan, SearchProbe } from './results.ts';
import type { Fixtures } from './seed.ts';
import {
  COMMON_WORD,
  FILTERED_SEARCH,
  MIDDLE_WORD,
  probeQueries,
  RARE_WORD,
} from './vocabulary.ts';
import { median } from './results.ts';

const PAGE = 24;
const IDLE_QUERIES = 200;

/** The searches run one at a time on one keep-alive connection; the slowest is the figure. */
async function idleLatency(origin: string): Promise<SearchProbe['idle']> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (url: string) =>
    new Promise<number>((resolve, reject) => {
      http
        .get(url, { agent }, (answer) => {
          answer.resume();
          answer.on('end', () => resolve(answer.statusCode ?? 0));
          answer.on('error', reject);
        })
        .on('error', reject);
    });
  const times: { ms: number; query: string }[] = [];
  const statuses: Record<string, number> = {};
  try {
    for (const { query } of probeQueries(IDLE_QUERIES)) {
      const started = performance.now();
      const status = await get(`${origin}/api/v1/listings?${query}`);
      times.push({ ms: performance.now() - started, query });
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  } finally {
    agent.destroy();
  }
  const sorted = [...times].sort((a, b) => a.ms - b.ms);
  const slowest = sorted.slice(-3).reverse();
  return {
    queries: times.length,
    p50Ms: median(times.map((t) => t.ms)),
    p99Ms: sorted[Math.ceil(sorted.length * 0.99) - 1]!.ms,
    maxMs: sorted[sorted.length - 1]!.ms,
    slowest: slowest.map((t) => ({ ms: t.ms, query: decodeURIComponent(t.query) })),
    statuses,
  };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** Rows of `listings` a plan fetched (kept or filtered out), and the scans that read them. */
function rowsRead(node: PlanNode, scans: Set<string>): number {
  let rows = 0;
  if (node['Relation Name'] === 'listings') {
    rows +=
      (node['Actual Rows'] +
        (node['Rows Removed by Filter'] ?? 0) +
        (node['Rows Removed by Index Recheck'] ?? 0)) *
      node['Actual Loops'];
    scans.add(`${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}`);
  } else if (
    node['Node Type'] === 'Bitmap Index Scan' &&
    node['Index Name']?.startsWith('listings')
  )
    scans.add(`Bitmap Index Scan ${node['Index Name']}`);
  for (const child of node.Plans ?? []) rows += rowsRead(child, scans);
  return rows;
}

interface PlanCase {
  name: string;
  sort: SearchSort;
  filters: SearchFilters;
  owner?: boolean;
}

function planCases(fixtures: Fixtures): PlanCase[] {
  const q = (word: string) => ({ q: word });
  return [
    { name: 'search-common', sort: 'newest', filters: q(COMMON_WORD) },
    { name: 'search-rare', sort: 'newest', filters: q(RARE_WORD) },
    {
      name: 'search-filtered',
      sort: 'newest',
      filters: {
        q: FILTERED_SEARCH.q,
        category: FILTERED_SEARCH.category,
        maxPriceCents: Number(FILTERED_SEARCH.max_price_cents),
      },
    },
    {
      name: 'search-price',
      sort: 'price_asc',
      filters: { minPriceCents: 2000, maxPriceCents: 5000 },
    },
    { name: 'search-owner', sort: 'newest', filters: { status: 'draft' }, owner: true },
    { name: 'search-sync', sort: 'updated_at', filters: { updatedSince: fixtures.syncSince } },
    { name: 'middle word', sort: 'newest', filters: q(MIDDLE_WORD) },
    { name: 'common word', sort: 'price_asc', filters: q(COMMON_WORD) },
    { name: 'middle word', sort: 'price_asc', filters: q(MIDDLE_WORD) },
    { name: 'rare word', sort: 'price_asc', filters: q(RARE_WORD) },
    { name: 'common word', sort: 'price_desc', filters: q(COMMON_WORD) },
    { name: 'rare word', sort: 'price_desc', filters: q(RARE_WORD) },
    {
      name: 'common word',
      sort: 'updated_at',
      filters: { q: COMMON_WORD, updatedSince: fixtures.syncSince },
    },
    {
      name: 'rare word',
      sort: 'updated_at',
      filters: { q: RARE_WORD, updatedSince: fixtures.syncSince },
    },
    { name: 'common word', sort: 'relevance', filters: q(COMMON_WORD) },
    { name: 'middle word', sort: 'relevance', filters: q(MIDDLE_WORD) },
    { name: 'rare word', sort: 'relevance', filters: q(RARE_WORD) },
  ];
}

/** EXPLAIN (ANALYZE, BUFFERS) of each case's first page, as the repository writes it. */
async function plans(databaseUrl: string, fixtures: Fixtures): Promise<SearchPlan[]> {
  const repository = new ListingsSearchRepository({} as Db);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const out: SearchPlan[] = [];
  try {
    for (const c of planCases(fixtures)) {
      const query: SearchQuery = {
        scope: c.owner
          ? { kind: 'seller', sellerId: fixtures.sellerId, environment: 'sandbox' }
          : { kind: 'public' },
        filters: c.filters,
        sort: c.sort,
        limit: PAGE,
      };
      // One statement per page (walk, then gathering only when the walk found too few).
      const chosen = [repository.statement(query)];
      const scans = new Set<string>();
      let read = 0;
      let rows = 0;
      let buffers = 0;
      let executionMs = 0;
      for (const statement of chosen) {
        const { sql: text, params } = render(statement);
        // Twice: the first run reads what the load left out of the cache; the second is a page.
        const explain = `explain (analyze, buffers, format json) ${text}`;
        await sql.unsafe(explain, params as never[], { prepare: false });
        const [row] = await sql.unsafe<
          { 'QUERY PLAN': [{ Plan: PlanNode; 'Execution Time': number }] }[]
        >(explain, params as never[], { prepare: false });
        const plan = row!['QUERY PLAN'][0];
        read += rowsRead(plan.Plan, scans);
        rows = plan.Plan['Actual Rows'];
        buffers += (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
        executionMs += plan['Execution Time'];
      }
      out.push({
        name: c.name,
        sort: c.sort,
        filters: Object.entries(c.filters)
          .map(([k, v]) => `${k}=${String(v)}`)
          .join(' '),
        rows,
        rowsRead: read,
        buffers,
        executionMs,
        scans: [...scans].join(', '),
      });
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  return out;
}

export async function probeSearch(
  origin: string,
  databaseUrl: string,
  fixtures: Fixtures,
): Promise<SearchProbe> {
  const idle = await idleLatency(origin);
  return {
    matches: fixtures.matches,
    ownDrafts: fixtures.ownDrafts,
    idle,
    plans: await plans(databaseUrl, fixtures),
  };
}
