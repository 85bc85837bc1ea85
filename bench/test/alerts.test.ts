/**
 * `npm run bench:alerts`'s pure logic (bench/src/alert-shapes.ts): the saved searches it seeds
 * and their keys (as SavedSearchesService.keysOf chooses them), the load's listings, and the
 * figures and targets of a run. The seed's keys against the service's own are checked by the run
 * itself (alerts.ts checkSeedKeys), on PostgreSQL.
 */
import t from 'tap';
import {
  ALERT_BRANDS,
  alertTargets,
  counters,
  cpuPerWrite,
  DETAIL_EVERY,
  keysOf,
  listingBody,
  percentileOf,
  perWrite,
  PRICE_WINDOW,
  savedSearches,
  SHAPES,
  unmatchableBody,
  type LevelFigures,
} from '../src/alert-shapes.ts';
import {
  BRANDS,
  COLORS,
  DETAILS,
  MATERIALS,
  NOUNS,
  SIZES,
  STYLES,
  prng,
} from '../src/vocabulary.ts';

const WORDS = ['sashiko', 'loden', 'harris'];
const random = (i: number) => prng(4600 + i);

t.test('saved searches: the shapes in turn, each the same whatever the batch', async (t) => {
  const all = savedSearches(0, 30, WORDS, random);
  t.same(savedSearches(10, 20, WORDS, random), all.slice(10), 'search i depends on i alone');
  t.same(
    all.slice(0, 6).map((s) => s.shape),
    [...SHAPES, ...SHAPES],
  );
  for (const search of all) {
    if (search.shape === 'brand-price') {
      t.ok(ALERT_BRANDS.includes(search.brand!), 'a niche brand');
      t.equal(search.maxPriceCents! - search.minPriceCents!, PRICE_WINDOW);
      t.equal(search.q, null);
    } else {
      t.ok(WORDS.includes(search.q!), 'a word of the pool');
      t.equal(search.brand, null);
      t.equal(search.size !== null, search.shape === 'word-size');
      if (search.size !== null) t.ok(SIZES.includes(search.size));
    }
  }
  t.same(ALERT_BRANDS, BRANDS.slice(30), 'the rarer half of the brands');
});

t.test('keys: as SavedSearchesService.keysOf chooses them for these filters', async (t) => {
  const [word, wordSize, brandPrice] = savedSearches(0, 3, WORDS, random);
  t.same(keysOf(word!, ['sashiko']), [{ kind: 'word', lexeme: 'sashiko' }]);
  t.same(keysOf(wordSize!, ['loden']), [{ kind: 'word', lexeme: 'loden' }], 'a word before a size');
  t.same(keysOf(brandPrice!, null), [{ kind: 'brand', brand: brandPrice!.brand }]);
  t.same(
    keysOf({ ...word!, q: 'loden or harris' }, ['loden', 'harri']),
    [
      { kind: 'word', lexeme: 'loden' },
      { kind: 'word', lexeme: 'harri' },
    ],
    'words one of which every match has: all of them',
  );
  t.throws(() => keysOf({ ...wordSize!, q: 'loden or harris' }, ['loden', 'harri']), {
    message: /size key/,
  });
  t.throws(() => keysOf({ ...word!, q: '-loden' }, null), { message: /refuses/ });
});

t.test('the load: listings drawn as the seed draws them, a specific word in few', async (t) => {
  const next = prng(46);
  const bodies = Array.from({ length: 400 }, (_, n) => listingBody(n, next));
  const titles = bodies.map((b) => String(b.title));
  const withDetail = titles.filter((title) => title.split(' ').length === 5);
  t.equal(withDetail.length, 400 / DETAIL_EVERY, 'one in DETAIL_EVERY has a fifth word');
  for (const body of bodies) {
    const [style, ...rest] = String(body.title).split(' ');
    t.ok(STYLES.includes(style!.toLowerCase()), 'a style first');
    t.ok(NOUNS.some(([noun, category]) => noun === rest.at(-1) && category === body.category));
    t.ok(COLORS.includes(String(body.color)) && MATERIALS.includes(rest.at(-2)!));
    t.ok(Number(body.price_cents) >= 500 && Number(body.price_cents) < 50_500);
  }
  t.ok(
    withDetail.every((title) => DETAILS.includes(title.split(' ')[1]!)),
    'the fifth word is a specific word, second',
  );
  const branded = bodies.filter((b) => b.brand !== undefined).length;
  t.ok(branded > 320 && branded < 400, `about nine in ten have a brand (${branded})`);
  t.match(listingBody(7, prng(1), 'alertprobe').title, / alertprobe$/, 'the probe word last');
  const none = unmatchableBody(3);
  const vocabulary = new Set([...STYLES, ...DETAILS, ...COLORS, ...MATERIALS, ...NOUNS.flat()]);
  t.notOk(
    `${none.title} ${none.description}`
      .toLowerCase()
      .split(/[^a-z-]+/)
      .some((w) => vocabulary.has(w)),
    'no word of the vocabulary',
  );
  t.notOk('brand' in none || 'size' in none, 'no brand, no size');
});

t.test('figures: percentiles, CPU and counters per write', async (t) => {
  const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
  t.equal(percentileOf(values, 50), 5);
  t.equal(percentileOf(values, 99), 10);
  t.equal(percentileOf([7], 99), 7);
  t.ok(Number.isNaN(percentileOf([], 50)));
  t.same(cpuPerWrite(1.5, 0.5, 1000), { api: 1500, postgres: 500, total: 2000 });
  t.ok(Number.isNaN(cpuPerWrite(1, 1, 0).total), 'no writes: no figure');
  const text = [
    '# HELP saved_search_candidates_total saved searches examined',
    '# TYPE saved_search_candidates_total counter',
    'saved_search_candidates_total 250',
    'saved_search_listings_total 100',
    'saved_search_matches_total{env="live"} 3',
    'saved_search_matches_total{env="sandbox"} 1',
    'http_requests_total 9',
  ].join('\n');
  const names = [
    'saved_search_listings_total',
    'saved_search_candidates_total',
    'saved_search_matches_total',
  ];
  const after = counters(text, names);
  t.same(after, {
    saved_search_candidates_total: 250,
    saved_search_listings_total: 100,
    saved_search_matches_total: 4,
  });
  t.same(perWrite({ saved_search_listings_total: 50, saved_search_candidates_total: 50 }, after), {
    listings: 50,
    examinedPerWrite: 4,
    matchedPerWrite: 0.08,
  });
  t.ok(Number.isNaN(perWrite(after, after).examinedPerWrite), 'no write: no figure');
});

t.test('targets: the CPU ratio, the worst p99 delivery, none examined for no match', async (t) => {
  const level = (savedSearches: number, total: number, p99: number | null): LevelFigures => ({
    savedSearches,
    cpuUsPerWrite: { api: total / 2, postgres: total / 2, total },
    examinedPerWrite: savedSearches / 1000,
    delivery: p99 === null ? null : { samples: 100, p50Ms: p99 / 2, p99Ms: p99 },
    unmatchable: { writes: 100, examinedPerWrite: 0, cpuUsPerWrite: total },
  });
  const [cpu, delivery, none] = alertTargets([
    level(0, 2000, null),
    level(100_000, 2300, 900),
    level(10_000, 2100, 1200),
  ]);
  t.match(cpu, { measured: '1.15x (2300 vs 2000 µs)', met: true });
  t.match(cpu!.target, /100,000 saved searches/);
  t.match(delivery, { measured: '1200 ms', met: false }, 'the worst level');
  t.match(none, { measured: '0', met: true });
  const [over] = alertTargets([level(0, 2000, null), level(100_000, 2500, 100)]);
  t.match(over, { measured: '1.25x (2500 vs 2000 µs)', met: false });
});
