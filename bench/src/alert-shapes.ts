/**
 * What `npm run bench:alerts` (alerts.ts) saves and writes, as pure functions of a seeded PRNG:
 * the saved searches of three shapes, the keys the service would give each, the listings of the
 * steady create load, and the figures of a run (medians, percentiles, ratios).
 *
 * Shapes, in turn (search i has shape i % 3), words and brands from vocabulary.ts:
 *  - `word`: `q` one of the specific words (DETAILS: sashiko, loden, harris...);
 *  - `word-size`: one of them and a size;
 *  - `brand-price`: a niche brand (the second half of BRANDS) and a price range of PRICE_WINDOW.
 * The words are DETAILS whose lexeme no other slot of a title makes (alerts.ts finds them with
 * PostgreSQL's stemmer): a title's common words (styles, colours, materials, nouns) are in every
 * write, and 33,000 searches of one of 250 words would match hundreds of searches a write.
 *
 * The create load's listings are the seed's (seed.ts): a style, a colour, a material and a noun,
 * each Zipf-skewed, a brand on nine in ten, a size, a price in [500, 50,500); one in
 * DETAIL_EVERY also has a specific word. So most writes share a key with some saved searches (a
 * niche brand's), and few match: at 100,000 saved searches a write's keys at its price find
 * ~6.5 of them to examine (~180 before the keys carried the price range, drizzle/0019) and ~4.5
 * match on average.
 */
import { percentile } from './arrivals.ts';
import {
  ATTRIBUTE_TAGS,
  BRANDS,
  COLORS,
  CONDITIONS,
  DETAILS,
  MATERIALS,
  NOUNS,
  SIZES,
  STYLE_TAGS,
  STYLES,
  zipfIndex,
} from './vocabulary.ts';

export type Shape = 'word' | 'word-size' | 'brand-price';
export const SHAPES: readonly Shape[] = ['word', 'word-size', 'brand-price'];

/** Listings' prices are in [PRICE_MIN, PRICE_MIN + PRICE_SPAN) cents. */
const PRICE_MIN = 500;
const PRICE_SPAN = 50_000;
/** A brand-price search's range: max_price_cents - min_price_cents. */
export const PRICE_WINDOW = 500;
/** One write in DETAIL_EVERY has a specific word (DETAILS) in its title. */
export const DETAIL_EVERY = 100;
/** The brands a brand-price search names: the rarer half (an alert is for a niche brand). */
export const ALERT_BRANDS = BRANDS.slice(BRANDS.length / 2);

export interface SavedSearchRow {
  shape: Shape;
  q: string | null;
  size: string | null;
  brand: string | null;
  minPriceCents: number | null;
  maxPriceCents: number | null;
}

/** The `count` saved searches from `start` (search i is the same whatever the batch). */
export function savedSearches(
  start: number,
  count: number,
  words: readonly string[],
  random: (i: number) => () => number,
): SavedSearchRow[] {
  return Array.from({ length: count }, (_, k) => {
    const i = start + k;
    const next = random(i);
    const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]!;
    const shape = SHAPES[i % SHAPES.length]!;
    if (shape === 'brand-price') {
      const min = PRICE_MIN + Math.floor((next() * (PRICE_SPAN - PRICE_WINDOW)) / 100) * 100;
      return {
        shape,
        q: null,
        size: null,
        brand: pick(ALERT_BRANDS),
        minPriceCents: min,
        maxPriceCents: min + PRICE_WINDOW,
      };
    }
    const q = pick(words);
    const size = shape === 'word-size' ? pick(SIZES) : null;
    return { shape, q, size, brand: null, minPriceCents: null, maxPriceCents: null };
  });
}

/** A key as saved_search_keys holds it: a lexeme as it is, a brand as `brand:` + md5 in SQL. */
export type Key = { kind: 'word'; lexeme: string } | { kind: 'brand'; brand: string };

/**
 * The keys SavedSearchesService.keysOf gives a live search of these filters (its order: seller,
 * brand, tag, a word every match has when there is one, category, color, size, the words one of
 * which every match has). `required` is requiredWords of q's tsquery (match-keys.ts).
 */
export function keysOf(search: SavedSearchRow, required: readonly string[] | null): Key[] {
  if (search.brand !== null) return [{ kind: 'brand', brand: search.brand }];
  const words = required ?? [];
  if (words.length === 1) return [{ kind: 'word', lexeme: words[0]! }];
  if (search.size !== null)
    throw new Error(`a size key (the bench saves no such search): ${JSON.stringify(search)}`);
  if (words.length > 1) return words.map((lexeme) => ({ kind: 'word', lexeme }));
  throw new Error(`no key: the service refuses ${JSON.stringify(search)}`);
}

const title = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

/**
 * The n-th listing of the create load (POST /api/v1/listings' body), as the seed draws one;
 * `extraWord` is appended to its title (the probe's word).
 */
export function listingBody(
  n: number,
  next: () => number,
  extraWord?: string,
): Record<string, unknown> {
  const zipf = <T>(list: readonly T[]) => list[zipfIndex(list.length, next()) - 1]!;
  const [noun, category] = zipf(NOUNS);
  const material = zipf(MATERIALS);
  const color = zipf(COLORS);
  const detail = n % DETAIL_EVERY === DETAIL_EVERY - 1 ? `${zipf(DETAILS)} ` : '';
  const brand = next() < 0.1 ? null : zipf(BRANDS);
  const words = `${title(zipf(STYLES))} ${detail}${color} ${material} ${noun}`;
  return {
    title: extraWord ? `${words} ${extraWord}` : words,
    description: 'Gently worn, no stains or holes; measurements in the photos.',
    category,
    condition: zipf(CONDITIONS),
    ...(brand === null ? {} : { brand }),
    size: zipf(SIZES),
    color,
    price_cents: PRICE_MIN + Math.floor(next() * PRICE_SPAN),
    tags: [zipf(STYLE_TAGS), material, zipf(ATTRIBUTE_TAGS)],
    cover_image_url: `https://img.example.com/alerts/${n}/0.jpg`,
    status: 'active',
  };
}

/** A listing that no saved search of the bench can match: no word, brand or size of theirs. */
export function unmatchableBody(n: number): Record<string, unknown> {
  return {
    title: `Stoneware teapot ${n}`,
    description: 'Glazed stoneware, dishwasher safe; ships boxed.',
    category: 'homeware',
    condition: 'good',
    price_cents: 2500 + (n % 100),
    cover_image_url: `https://img.example.com/alerts/none/${n}.jpg`,
    status: 'active',
  };
}

/** The nearest-rank percentile (arrivals.ts's) of unsorted values; NaN when none. */
export function percentileOf(values: readonly number[], p: number): number {
  return values.length === 0
    ? NaN
    : percentile(
        [...values].sort((a, b) => a - b),
        p,
      );
}

/** CPU microseconds per write: the API's and PostgreSQL's seconds over the writes made. */
export function cpuPerWrite(apiSeconds: number, postgresSeconds: number, writes: number) {
  if (writes <= 0) return { api: NaN, postgres: NaN, total: NaN };
  const us = (seconds: number) => Math.round((seconds * 1e6) / writes);
  return {
    api: us(apiSeconds),
    postgres: us(postgresSeconds),
    total: us(apiSeconds + postgresSeconds),
  };
}

/** Counter increments over a run, per write: examined and matched per listing the matcher saw. */
export function perWrite(
  before: Record<string, number>,
  after: Record<string, number>,
): { listings: number; examinedPerWrite: number; matchedPerWrite: number } {
  const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
  const listings = delta('saved_search_listings_total');
  const per = (name: string) =>
    listings > 0 ? Math.round((delta(name) / listings) * 100) / 100 : NaN;
  return {
    listings,
    examinedPerWrite: per('saved_search_candidates_total'),
    matchedPerWrite: per('saved_search_matches_total'),
  };
}

/** The counters of a Prometheus text exposition (name without labels -> value). */
export function counters(text: string, names: readonly string[]): Record<string, number> {
  const values: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^([a-z_:][a-z0-9_:]*)(?:\{[^}]*\})? ([0-9.e+-]+)$/i.exec(line.trim());
    if (match && names.includes(match[1]!))
      values[match[1]!] = (values[match[1]!] ?? 0) + Number(match[2]);
  }
  return values;
}

/** What the targets read of a level (alerts.ts's results): medians over its rounds. */
export interface LevelFigures {
  savedSearches: number;
  cpuUsPerWrite: { api: number; postgres: number; total: number };
  examinedPerWrite: number;
  /** Commit -> delivery of the probes (none at 0 saved searches: nothing to match them). */
  delivery: { samples: number; p50Ms: number; p99Ms: number } | null;
  unmatchable: { writes: number; examinedPerWrite: number; cpuUsPerWrite: number };
}

export interface Target {
  target: string;
  goal: string;
  measured: string;
  met: boolean;
}

/** Issue #46 item 5's targets, judged on the levels' medians. */
export function alertTargets(levels: LevelFigures[]): Target[] {
  const none = levels.find((level) => level.savedSearches === 0);
  const most = levels.reduce((a, b) => (b.savedSearches > a.savedSearches ? b : a));
  const ratio = none ? most.cpuUsPerWrite.total / none.cpuUsPerWrite.total : NaN;
  const delivered = levels.filter((level) => level.delivery !== null);
  const worstP99 = Math.max(...delivered.map((level) => level.delivery!.p99Ms));
  const examined = Math.max(...levels.map((level) => level.unmatchable.examinedPerWrite));
  return [
    {
      target: `CPU per write (API + PostgreSQL), ${most.savedSearches.toLocaleString('en')} saved searches vs none`,
      goal: '<= 1.2x',
      measured: `${ratio.toFixed(2)}x (${most.cpuUsPerWrite.total} vs ${none?.cpuUsPerWrite.total} µs)`,
      met: ratio <= 1.2,
    },
    {
      target: 'commit -> listing.matched delivery, p99 (worst level)',
      goal: '<= 1000 ms',
      measured: delivered.length ? `${worstP99} ms` : 'no delivery',
      met: delivered.length > 0 && worstP99 <= 1000,
    },
    {
      target: 'saved searches examined per write no saved search can match',
      goal: '0 at every level',
      measured: String(examined),
      met: examined === 0,
    },
  ];
}
