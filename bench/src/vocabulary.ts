/**
 * The words of the seeded listings (seed.ts) and of the searches run against them: a fixed
 * vocabulary, each slot's words drawn with a Zipf-like skew (the k-th word of a slot of n about
 * 1/k as often as the first), so a search meets common words, rare ones and everything between.
 * Deterministic: the seed draws with a hash of the row number in SQL (no state, set-based), the
 * search probe with a seeded PRNG here.
 */

/** Styles, first word of a title: the first is the common word (about 19% of titles). */
// prettier-ignore
export const STYLES = [
  'vintage', 'classic', 'oversized', 'cropped', 'slim', 'relaxed', 'boxy', 'tailored',
  'washed', 'distressed', 'retro', 'minimalist', 'preppy', 'bohemian', 'utility', 'sporty',
  'chunky', 'fitted', 'longline', 'double-breasted', 'quilted', 'padded', 'lightweight',
  'heavyweight', 'brushed', 'raw', 'faded', 'embroidered', 'pleated', 'ribbed', 'waxed',
  'reversible', 'belted', 'hooded', 'sleeveless', 'wrap', 'tiered', 'ruffled', 'smocked',
  'asymmetric',
];

/** Pattern and detail words, in about a third of titles: the tail is the rare words. */
// prettier-ignore
export const DETAILS = [
  'striped', 'checked', 'floral', 'plaid', 'graphic', 'corduroy', 'herringbone', 'houndstooth',
  'paisley', 'gingham', 'tartan', 'camo', 'polka-dot', 'leopard', 'argyle', 'fair-isle',
  'cable-knit', 'tie-dye', 'patchwork', 'crochet', 'lace', 'sequin', 'velvet', 'mesh',
  'seersucker', 'chambray', 'jacquard', 'ikat', 'batik', 'madras', 'pinstripe', 'windowpane',
  'glen-check', 'nordic', 'aran', 'shearling', 'teddy', 'sherpa', 'toggle', 'zip-off',
  'drawstring', 'peplum', 'puff-sleeve', 'balloon-sleeve', 'bishop-sleeve', 'cowl-neck',
  'mock-neck', 'turtleneck', 'v-neck', 'crew-neck', 'scoop-neck', 'halter', 'off-shoulder',
  'one-shoulder', 'bodycon', 'a-line', 'empire', 'shift', 'slip', 'babydoll', 'prairie',
  'peasant', 'western', 'rodeo', 'fringe', 'studded', 'riveted', 'selvedge', 'sanforized',
  'indigo', 'overdyed', 'garment-dyed', 'stonewashed', 'acid-wash', 'bleached', 'painted',
  'hand-knit', 'hand-stitched', 'boiled-wool', 'loden', 'melton', 'donegal', 'harris',
  'moleskin', 'gabardine', 'poplin', 'oxford', 'flannel', 'chenille', 'boucle', 'mohair',
  'alpaca', 'angora', 'merino', 'lambswool', 'shetland', 'guernsey', 'gansey', 'breton',
  'mariniere', 'kimono', 'haori', 'noragi', 'sashiko', 'boro', 'kantha', 'suzani', 'dashiki',
  'kente', 'batwing', 'raglan', 'dolman', 'epaulette', 'norfolk', 'safari', 'chore',
  'shacket', 'anorak', 'smock', 'gilet', 'cagoule', 'parka', 'duffle', 'peacoat', 'ulster',
  'chesterfield', 'inverness', 'macintosh',
];

// prettier-ignore
export const COLORS = [
  'black', 'navy', 'white', 'grey', 'cream', 'olive', 'brown', 'beige', 'blue', 'green', 'red',
  'rust', 'khaki', 'burgundy', 'camel', 'pink', 'mustard', 'teal', 'lilac', 'orange', 'ecru',
  'charcoal', 'sage', 'coral', 'mauve',
];

// prettier-ignore
export const MATERIALS = [
  'cotton', 'wool', 'denim', 'leather', 'linen', 'silk', 'cashmere', 'suede', 'nylon', 'fleece',
  'polyester', 'tweed', 'canvas', 'satin', 'jersey', 'viscose', 'hemp', 'corduroy', 'velour',
  'twill',
];

/** Nouns of a title, each with its category (the same index). */
// prettier-ignore
export const NOUNS: [noun: string, category: string][] = [
  ['jacket', 'jackets'], ['jeans', 'jeans'], ['shirt', 'shirts'], ['sweater', 'knitwear'],
  ['dress', 'dresses'], ['boots', 'shoes'], ['coat', 'coats'], ['t-shirt', 't-shirts'],
  ['hoodie', 'tops'], ['trousers', 'trousers'], ['cardigan', 'knitwear'], ['blazer', 'jackets'],
  ['skirt', 'skirts'], ['sneakers', 'shoes'], ['scarf', 'accessories'], ['bag', 'bags'],
  ['shorts', 'trousers'], ['blouse', 'shirts'], ['vest', 'tops'], ['overshirt', 'shirts'],
  ['trench', 'coats'], ['loafers', 'shoes'], ['beanie', 'accessories'], ['jumpsuit', 'dresses'],
  ['overalls', 'trousers'], ['sandals', 'shoes'], ['belt', 'accessories'], ['tote', 'bags'],
  ['backpack', 'bags'], ['cap', 'accessories'], ['polo', 'tops'], ['chinos', 'trousers'],
  ['windbreaker', 'jackets'], ['bomber', 'jackets'], ['poncho', 'coats'], ['kilt', 'skirts'],
  ['clogs', 'shoes'], ['mittens', 'accessories'], ['satchel', 'bags'], ['waistcoat', 'suits'],
];

/** Brands, a tenth of listings with none. */
// prettier-ignore
export const BRANDS = [
  "Levi's", 'Zara', 'Uniqlo', 'H&M', 'Nike', 'Patagonia', 'Carhartt', 'COS', 'Adidas', 'Arket',
  'Dr. Martens', 'Ralph Lauren', 'Barbour', 'Mango', 'The North Face', 'Tommy Hilfiger', 'Muji',
  'Everlane', 'Ganni', 'Dickies', 'Converse', 'Vans', 'New Balance', 'Lacoste', 'Fred Perry',
  'Wrangler', 'Lee', 'Diesel', 'Massimo Dutti', 'Weekday', 'Reformation', 'Acne Studios',
  'Burberry', 'Columbia', 'Fjallraven', 'Birkenstock', 'Salomon', 'Veja', 'Filson', 'Pendleton',
  'Woolrich', 'Stussy', 'Arcteryx', 'Asics', 'Sezane', 'Toast', 'Whistles', 'Boden', 'Seasalt',
  'Reiss', 'AllSaints', 'Sunspel', 'Edwin', 'Norse Projects', 'Our Legacy', 'Margaret Howell',
  'Kapital', 'Visvim', 'Issey Miyake', 'Yohji Yamamoto',
];

/** Two tags of each listing besides its material: a style tag and an attribute tag. */
// prettier-ignore
export const STYLE_TAGS = [
  'vintage', 'streetwear', 'minimal', 'workwear', 'y2k', '90s', 'boho', 'preppy', 'outdoor',
  'festival', '70s', '80s', 'grunge', 'gorpcore', 'cottagecore', 'techwear', 'mod', 'punk',
  'western', 'military',
];
// prettier-ignore
export const ATTRIBUTE_TAGS = [
  'sustainable', 'basics', 'designer', 'handmade', 'deadstock', 'unisex', 'plus-size',
  'petite', 'maternity', 'vegan', 'organic', 'recycled', 'limited-edition', 'made-in-italy',
  'made-in-japan', 'made-in-usa',
];

/**
 * Conditions, most listed first; `poor` (the enum's last) is never drawn, so a search for it
 * matches nothing (the worst-case searches, scenarios.ts).
 */
// prettier-ignore
export const CONDITIONS = [
  'good', 'like_new', 'excellent', 'new_without_tags', 'new_with_tags', 'fair',
];

/** Sizes, the middle ones most listed; none is `XXXL` (a worst-case search's). */
export const SIZES = ['M', 'L', 'S', 'XL', 'XS', '42', '38', 'XXL'];

/** The scenarios' words (scenarios.ts): the first style, and the last detail word. */
export const COMMON_WORD = STYLES[0]!;
export const RARE_WORD = DETAILS[DETAILS.length - 1]!;
/**
 * A word in about 0.5% of listings: too rare for the feed's order to find a page soon (25 / 0.5%
 * = 5,000 rows), too common for the text index to fetch few (5,000 at 1,000,000 listings). The
 * worst case of a sorted search, about sqrt(25 x listings) rows either way (search-probe.ts).
 */
export const MIDDLE_WORD = DETAILS[13]!;
/** A word of a middle frequency (the second material) and two filters. */
export const FILTERED_SEARCH = { q: MATERIALS[1]!, category: 'coats', max_price_cents: '20000' };

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How the seed skews a slot: the 1-based index floor((n + 1)^u) for u uniform in [0, 1). */
export const zipfIndex = (n: number, u: number) => Math.floor((n + 1) ** u);

interface ProbeQuery {
  /** The query string of GET /api/v1/listings (without `?`). */
  query: string;
}

const SORTS = ['newest', 'newest', 'relevance', 'price_asc', 'price_desc'] as const;

/**
 * `count` searches a user could type, drawn from the vocabulary: one to three words (each word
 * uniformly from the whole vocabulary, so rare words are as likely as common ones), a third
 * with a category or price filter, each with a sort. The same list for the same seed.
 */
export function probeQueries(count: number, seed = 30): ProbeQuery[] {
  const random = prng(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const words = [
    ...STYLES,
    ...DETAILS,
    ...COLORS,
    ...MATERIALS,
    ...NOUNS.map(([noun]) => noun),
    ...BRANDS,
    ...STYLE_TAGS,
    ...ATTRIBUTE_TAGS,
  ];
  const categories = [...new Set(NOUNS.map(([, category]) => category))];
  return Array.from({ length: count }, () => {
    const n = 1 + Math.floor(random() * 3);
    const q = Array.from({ length: n }, () => pick(words)).join(' ');
    const params = new URLSearchParams({ q, limit: '24', sort: pick(SORTS) });
    const filter = random();
    if (filter < 1 / 6) params.set('category', pick(categories));
    else if (filter < 1 / 3) params.set('max_price_cents', String(1000 + pick([0, 2000, 9000])));
    return { query: params.toString() };
  });
}
