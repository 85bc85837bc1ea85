/**
 * What is measured: the API's main paths, each paired with the bare route that runs the same
 * SQL (baseline-server.ts). Paths and bodies are lists taken in turn by the load generator.
 */
import { loadConfig } from '../../src/config.ts';
import type { ArrivalStep } from './arrivals.ts';
import type { LoadSpec } from './load.ts';
import { REPLAY_KEYS } from './replay-keys.ts';
import type { Fixtures } from './seed.ts';
import { COMMON_WORD, FILTERED_SEARCH, RARE_WORD } from './vocabulary.ts';

export type BaselineName =
  'const' | 'list' | 'deep' | 'get' | 'insert' | 'lookup' | 'update' | 'update-only' | 'batch';
export type ScenarioName =
  | 'list'
  | 'poll'
  | 'deep'
  | 'get'
  | 'get-oauth'
  | 'create'
  | 'replay'
  | 'replay-crowded'
  | 'patch'
  | 'batch'
  | SearchScenarioName
  | typeof SEARCH_OVERLOAD;

/** GET /listings as a search (issue #30), each against the plain feed page of the same round. */
export const SEARCH_SCENARIOS = [
  'search-common',
  'search-rare',
  'search-filtered',
  'search-price',
  'search-owner',
  'search-sync',
] as const;
export type SearchScenarioName = (typeof SEARCH_SCENARIOS)[number];

/**
 * Issue #57 item 3: the common-word search at the run's full concurrency (50), which the search
 * gate mostly refuses: its goodput (200s a second) and what each refused answer (503) costs.
 */
export const SEARCH_OVERLOAD = 'search-overload';

/**
 * The searches one process admits with the shipped settings (src/config.ts): SEARCH_CONCURRENCY
 * running and SEARCH_QUEUE waiting. The search scenarios run with this many clients, so each
 * of their answers is a search's 200, not the gate's 503 (a run with another status fails).
 */
export function searchAdmitted(): number {
  const { searchConcurrency, searchQueue } = loadConfig({});
  return searchConcurrency + searchQueue;
}

type Request = Omit<LoadSpec, 'origin' | 'connections' | 'duration'>;

export interface Scenario {
  name: ScenarioName;
  label: string;
  api: Request;
  /** The status every answer must have (anything else makes the run invalid). */
  status: number;
  /**
   * Other statuses its answers may have (the overload's 503s); any status but these and
   * `status` fails the run, and the scenario with it (no figure of it is judged).
   */
  alsoStatuses?: number[];
  /** Closed-loop clients of its runs, at most the run's --connections (default: those). */
  connections?: number;
  /**
   * The overload scenario: the CPU of its refused answers is what its run used beyond its 200s,
   * each costing what one of this scenario's cost in the same round.
   */
  shedOf?: ScenarioName;
  /** The bare route running the same SQL; none for searches (compared with the feed instead). */
  baseline?: BaselineName;
  /** Listings per request (the batch's items/s). */
  items: number;
  /** Also run against the Express peer (peer-server.ts), with the same request. */
  peer?: boolean;
  /** Further bare routes to compare with, reported beside the ratio (not targets). */
  alsoBaselines?: BaselineName[];
  /**
   * Also compared with another scenario of the same round (median over rounds of this req/s /
   * that req/s): the same request in other conditions, where a bare route has nothing to say.
   */
  versus?: ScenarioName;
}

export interface Baseline {
  name: BaselineName;
  label: string;
  request: Request;
}

export const BATCH_SIZE = 25;
const API = '/api/v1';

export function listingBody(
  n: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    title: `Bench wool coat ${n}`,
    price_cents: 4900 + n,
    description: 'Double-breasted wool coat, worn twice; measurements in the photos.',
    category: 'coats',
    condition: 'like_new',
    brand: 'Arket',
    size: 'M',
    color: 'navy',
    tags: ['wool', 'winter', 'minimal'],
    cover_image_url: `https://img.example.com/bench/${n}/0.jpg`,
    image_urls: [
      `https://img.example.com/bench/${n}/0.jpg`,
      `https://img.example.com/bench/${n}/1.jpg`,
    ],
    status: 'active',
    ...extra,
  };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

export function defineScenarios(fixtures: Fixtures): {
  scenarios: Scenario[];
  baselines: Baseline[];
} {
  const auth = { authorization: `Bearer ${fixtures.sandboxKey}` };
  const deepQuery = `?limit=24&cursor=${encodeURIComponent(fixtures.deepCursor)}`;
  const createBodies = range(50).map((n) => JSON.stringify(listingBody(n)));
  const patchBodies = range(50).map((n) =>
    JSON.stringify({ title: `Bench patched title ${n}`, price_cents: 5000 + n }),
  );
  const batchBodies = range(4).map((b) =>
    JSON.stringify({ items: range(BATCH_SIZE).map((i) => listingBody(b * 100 + i)) }),
  );
  // Many keys, each replayed in turn: 50 connections on one key would only measure its row lock.
  const replayKeys = range(REPLAY_KEYS).map((n) => `bench-replay-${String(n).padStart(4, '0')}`);
  const getPaths = (prefix: string) => fixtures.liveIds.map((id) => `${prefix}/listings/${id}`);
  const patchPaths = (prefix: string) =>
    fixtures.ownSandboxIds.map((id) => `${prefix}/listings/${id}`);

  const scenarios: Scenario[] = [
    {
      name: 'list',
      label: 'GET /listings (anonymous, limit 24)',
      api: { method: 'GET', paths: [`${API}/listings?limit=24`] },
      status: 200,
      baseline: 'list',
      items: 1,
      peer: true,
    },
    {
      // A client polling the feed with the ETag it holds (set once the API answered): 304s.
      name: 'poll',
      label: 'GET /listings, unchanged, with If-None-Match (304)',
      api: { method: 'GET', paths: [`${API}/listings?limit=24`], headers: {} },
      status: 304,
      baseline: 'list',
      items: 1,
    },
    {
      name: 'deep',
      label: `GET /listings deep page (cursor 200 pages in)`,
      api: { method: 'GET', paths: [`${API}/listings${deepQuery}`] },
      status: 200,
      baseline: 'deep',
      items: 1,
      peer: true,
    },
    {
      name: 'get',
      label: 'GET /listings/{id}',
      api: { method: 'GET', paths: getPaths(API) },
      status: 200,
      baseline: 'get',
      items: 1,
      peer: true,
    },
    {
      // The same reads with an OAuth access token, against the anonymous ones of the same round:
      // what the credential costs (its lookup is held between requests, as a key's is).
      name: 'get-oauth',
      label: 'GET /listings/{id} (OAuth access token)',
      api: {
        method: 'GET',
        paths: getPaths(API),
        headers: { authorization: `Bearer ${fixtures.accessToken}` },
      },
      status: 200,
      baseline: 'get',
      items: 1,
      versus: 'get',
    },
    {
      name: 'create',
      label: 'POST /listings (sandbox key)',
      api: { method: 'POST', paths: [`${API}/listings`], bodies: createBodies, headers: auth },
      status: 201,
      baseline: 'insert',
      items: 1,
      peer: true,
    },
    {
      name: 'replay',
      label: 'POST /listings idempotent replay',
      api: {
        method: 'POST',
        paths: [`${API}/listings`],
        bodies: [JSON.stringify(listingBody(0))],
        headers: auth,
        headerVariants: replayKeys.map((key) => ({ 'idempotency-key': key })),
      },
      status: 200,
      baseline: 'lookup',
      items: 1,
    },
    {
      // Issue #18 item 0: the same replay by a seller holding crowdedListings listings, its
      // keys among their external_ids, against the replay above: a cost that grows with a
      // seller's inventory shows as a ratio below 1. Its bare route is the replay's (the lookup
      // for the bench developer's keys).
      name: 'replay-crowded',
      label: `POST /listings idempotent replay, seller with ${fixtures.counts.crowded.toLocaleString('en')} listings`,
      api: {
        method: 'POST',
        paths: [`${API}/listings`],
        bodies: [JSON.stringify(listingBody(0))],
        headers: { authorization: `Bearer ${fixtures.crowded.sandboxKey}` },
        headerVariants: fixtures.crowded.replayKeys.map((key) => ({ 'idempotency-key': key })),
      },
      status: 200,
      baseline: 'lookup',
      items: 1,
      versus: 'replay',
    },
    {
      name: 'patch',
      label: 'PATCH /listings/{id}',
      api: { method: 'PATCH', paths: patchPaths(API), bodies: patchBodies, headers: auth },
      status: 200,
      baseline: 'update',
      alsoBaselines: ['update-only'],
      items: 1,
    },
    {
      name: 'batch',
      label: `POST /listings/batch (${BATCH_SIZE} items)`,
      api: { method: 'POST', paths: [`${API}/listings/batch`], bodies: batchBodies, headers: auth },
      status: 200,
      baseline: 'batch',
      items: BATCH_SIZE,
    },
    ...searchScenarios(fixtures),
  ];

  const baselines: Baseline[] = [
    {
      name: 'const',
      label: 'bare route returning a constant',
      request: { method: 'GET', paths: ['/const'] },
    },
    {
      name: 'list',
      label: 'bare feed SQL',
      request: { method: 'GET', paths: ['/listings?limit=24'] },
    },
    {
      name: 'deep',
      label: 'bare feed SQL, deep cursor',
      request: { method: 'GET', paths: [`/listings${deepQuery}`] },
    },
    { name: 'get', label: 'bare by-id SQL', request: { method: 'GET', paths: getPaths('') } },
    {
      name: 'insert',
      label: 'bare INSERT + outbox',
      request: { method: 'POST', paths: ['/listings'], bodies: createBodies },
    },
    {
      name: 'lookup',
      label: 'bare external_id lookup (all a no-op replay runs)',
      request: {
        method: 'POST',
        paths: ['/replay'],
        bodies: [JSON.stringify(listingBody(0))],
        headerVariants: replayKeys.map((key) => ({ 'idempotency-key': key })),
      },
    },
    {
      name: 'update',
      label: "bare UPDATE + outbox (PATCH's statement)",
      request: { method: 'PATCH', paths: patchPaths(''), bodies: patchBodies },
    },
    {
      name: 'update-only',
      label: 'bare UPDATE, listing only',
      request: {
        method: 'PATCH',
        paths: fixtures.ownSandboxIds.map((id) => `/listings-only/${id}`),
        bodies: patchBodies,
      },
    },
    {
      name: 'batch',
      label: `bare ${BATCH_SIZE}-row INSERT + outbox`,
      request: { method: 'POST', paths: ['/listings/batch'], bodies: batchBodies },
    },
  ];
  return { scenarios, baselines };
}

/** The search scenarios' queries (search-probe.ts EXPLAINs the same), limit 24 as the feed's. */
function searchQueries(fixtures: Pick<Fixtures, 'syncSince'>): Record<SearchScenarioName, string> {
  return {
    'search-common': `q=${COMMON_WORD}`,
    'search-rare': `q=${RARE_WORD}`,
    'search-filtered': new URLSearchParams(FILTERED_SEARCH).toString(),
    'search-price': 'min_price_cents=2000&max_price_cents=5000&sort=price_asc',
    'search-owner': 'seller=me&status=draft',
    'search-sync': `sort=updated_at&updated_since=${encodeURIComponent(fixtures.syncSince)}`,
  };
}

function searchScenarios(fixtures: Fixtures): Scenario[] {
  const queries = searchQueries(fixtures);
  const admitted = searchAdmitted();
  const labels: Record<SearchScenarioName, string> = {
    'search-common': `search, a common word (q=${COMMON_WORD})`,
    'search-rare': `search, a rare word (q=${RARE_WORD})`,
    'search-filtered': `search, a word and two filters (${queries['search-filtered']})`,
    'search-price': 'search, a price range by price (sort=price_asc)',
    'search-owner': 'owner view, drafts (seller=me&status=draft, sandbox key)',
    'search-sync': 'sync page (sort=updated_at&updated_since=1 day ago)',
  };
  const searches = SEARCH_SCENARIOS.map((name): Scenario => ({
    name,
    label: `GET /listings ${labels[name]}, ${admitted} clients (what the search gate admits)`,
    api: {
      method: 'GET',
      paths: [`${API}/listings?${queries[name]}&limit=24`],
      ...(name === 'search-owner'
        ? { headers: { authorization: `Bearer ${fixtures.sandboxKey}` } }
        : {}),
    },
    status: 200,
    connections: admitted,
    items: 1,
    versus: 'list',
  }));
  const overload: Scenario = {
    name: SEARCH_OVERLOAD,
    label: `GET /listings ${labels['search-common']}, overloaded: every connection searching`,
    api: searches[0]!.api,
    status: 200,
    alsoStatuses: [503],
    items: 1,
    shedOf: 'search-common',
  };
  return [...searches, overload];
}

/**
 * Issue #35 item 4's request mix, in turn: a feed page, a by-id miss, three creates. Their keys
 * start with `keyPrefix`: another prefix on the same seller makes every create new again.
 */
export function mixedSteps(sandboxKey: string, keyPrefix = 'mixed-'): ArrivalStep[] {
  const headers = { authorization: `Bearer ${sandboxKey}` };
  // Ids no listing has: each read is a 404 (a deleted or mistyped id, as a client sends).
  const misses = Array.from({ length: 1000 }, (_, i) => {
    const hex = i.toString(16).padStart(12, '0');
    return `${API}/listings/00000000-0000-4000-8000-${hex}`;
  });
  const bodies = Array.from({ length: 50 }, (_, n) => JSON.stringify(listingBody(n)));
  // Each create step counts its own keys: three prefixes, so no key is sent twice in a half.
  const create = (prefix: string): ArrivalStep => ({
    name: 'create',
    method: 'POST',
    paths: [`${API}/listings`],
    bodies,
    headers,
    idempotencyKeyPrefix: prefix,
  });
  return [
    { name: 'feed page', method: 'GET', paths: [`${API}/listings?limit=24`], headers },
    { name: 'by-id miss', method: 'GET', paths: misses, headers },
    create(`${keyPrefix}a-`),
    create(`${keyPrefix}b-`),
    create(`${keyPrefix}c-`),
  ];
}

/** The public feed's first page, what every worst-case search is compared with. */
export const FEED_PAGE = `${API}/listings?limit=24`;

/** Issue #42 item 6: every sort of GET /listings; relevance needs `q` (a common word here). */
export const WORST_SORTS = [
  'newest',
  'price_asc',
  'price_desc',
  'updated_at',
  'relevance',
] as const;

/**
 * A value of each filter that no live listing has (seed.ts leaves `poor` and impact mode off
 * the live feed; the seller has listings, all in the sandbox): the search can fill no page and
 * has to rule out every row its order offers.
 */
export const NO_MATCH = {
  size: 'XXXL',
  color: 'chartreuse',
  tag: 'no-such-tag',
  brand: 'No Such Brand',
  category: 'no-such-category',
  condition: 'poor',
  impact_mode: 'true',
  seller: '',
} as const;
export type WorstFilter = keyof typeof NO_MATCH;

/** One worst-case search: a request of GET /listings, sent as it is, one at a time or in load. */
export interface WorstCase {
  name: string;
  label: string;
  path: string;
  headers?: Record<string, string>;
  /** A filter matching nothing, or one seller's inventory, or a conditional search. */
  kind: 'no-match' | 'one-seller' | 'stale-etag';
}

/**
 * Issue #42 item 6's worst-case searches, through HTTP only (the search SQL may change under
 * them): each filter with a value matching nothing under each sort, a single seller's listings
 * (seller=<username>) by price and by change, and a search with a stale If-None-Match (an
 * ETag of another page, so the answer is a 200 with the page).
 */
export function worstCases(
  fixtures: Pick<Fixtures, 'oneSeller' | 'nothingPublicSeller'>,
  staleEtag: string,
): WorstCase[] {
  const values: Record<WorstFilter, string> = {
    ...NO_MATCH,
    seller: fixtures.nothingPublicSeller,
  };
  const page = (query: Record<string, string>) =>
    `${API}/listings?${new URLSearchParams({ ...query, limit: '24' }).toString()}`;
  const noMatch = (Object.keys(values) as WorstFilter[]).flatMap((filter) =>
    WORST_SORTS.map((sort): WorstCase => ({
      name: `${filter}-${sort}`,
      label: `${filter}=${values[filter]}, sort=${sort}${sort === 'relevance' ? `, q=${COMMON_WORD}` : ''}`,
      path: page({
        [filter]: values[filter],
        ...(sort === 'relevance' ? { q: COMMON_WORD } : {}),
        sort,
      }),
      kind: 'no-match',
    })),
  );
  const oneSeller = (['price_asc', 'price_desc', 'updated_at'] as const).map((sort): WorstCase => ({
    name: `one-seller-${sort}`,
    label: `seller=${fixtures.oneSeller} (one seller's listings), sort=${sort}`,
    path: page({ seller: fixtures.oneSeller, sort }),
    kind: 'one-seller',
  }));
  const stale: WorstCase = {
    name: 'stale-etag',
    label: `q=${COMMON_WORD} with a stale If-None-Match (200)`,
    path: page({ q: COMMON_WORD }),
    headers: { 'if-none-match': staleEtag },
    kind: 'stale-etag',
  };
  return [...noMatch, ...oneSeller, stale];
}
