/**
 * Property-based body validation of POST /listings (and PATCH): whatever JSON arrives, the
 * answer is never a 5xx; an invalid body is 400 validation_error whose details point at the
 * offending field (OpenAPI "Errors"), and nothing at all is written; a valid body is 201 or 200.
 */
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { call, createSeller, listingsApp, PHOTO, type Answer, type Json } from './support.ts';
import { seed } from '../helpers/seed.ts';

t.comment(`fast-check seed ${seed} (test/helpers/seed.ts; TEST_SEED=n reruns one)`);

const app = await listingsApp(t);
const seller = await createSeller(app, { live: false });
const key = seller.sandbox;

/**
 * The listings table's row count and its newest row version: equal before and after means nothing
 * was written. Every insert or update writes a row version whose xmin is the writing
 * transaction's id, newer than every earlier one (a delete changes the count), so this sees any
 * write without digesting each row's text twice per run as it once did.
 */
async function snapshot(): Promise<{ rows: number; digest: string }> {
  const [row] = await queryRows<{ rows: number; digest: string | null }>(
    app.db,
    sql`select count(*)::int as rows, max(xmin::text::bigint)::text as digest from listings`,
  );
  return { rows: row!.rows, digest: row!.digest ?? '' };
}

const FIELDS = [
  'title',
  'price_cents',
  'price_dollars',
  'currency',
  'description',
  'category',
  'brand',
  'size',
  'color',
  'condition',
  'tags',
  'status',
  'cover_image_url',
  'image_urls',
  'external_id',
  'impact_mode',
] as const;

/** Strings as clients send them, including what PostgreSQL text cannot hold. */
const anyString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom(
    '',
    'ab',
    'https://images.example.com/a.jpg',
    '\u0000',
    'ab\u0000cd',
    '\ud800',
    'x\udfffy',
    '👗👗👗',
  ),
);
const anyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, -1, 1.005, 19.99, 1e21, 99999999, 100000000),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    anyString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...FIELDS), anyString), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** RFC 6901: "~" is written "~0" and "/" is written "~1" inside a JSON Pointer segment. */
const pointerSegment = (name: string) => name.replaceAll('~', '~0').replaceAll('/', '~1');

/** What a 400 must look like; returns a problem or null. */
function validationProblem(res: Answer, allowedRoots: Set<string>): string | null {
  if (res.body?.error?.code !== 'validation_error') return `code ${res.body?.error?.code}`;
  const details = res.body.error.details;
  if (!Array.isArray(details) || details.length === 0) return 'no details';
  for (const detail of details) {
    if (typeof detail.path !== 'string' || typeof detail.message !== 'string')
      return `malformed detail ${JSON.stringify(detail)}`;
    if (detail.path === '') continue; // the body as a whole
    if (!detail.path.startsWith('/')) return `detail path ${detail.path} is not a JSON Pointer`;
    // RFC 6901 escapes a field name's "/" and "~" (the test below checks unknown fields' paths).
    const names = [...allowedRoots];
    const named = names.some((name) =>
      [`/${pointerSegment(name)}`, `/${name}`].some(
        (prefix) => detail.path === prefix || detail.path.startsWith(`${prefix}/`),
      ),
    );
    if (!named) return `detail path ${detail.path} names no field of the body`;
  }
  if (res.headers['x-request-id'] !== res.body.meta?.request_id) return 'request id mismatch';
  return null;
}

/** Fields a 400 may name besides those sent: the required ones and the photo rule. */
const IMPLIED = ['title', 'price_cents', 'price_dollars', 'cover_image_url', 'image_urls'];

t.test(
  'property: any JSON body gets a 4xx or a success, never a 5xx; a 400 writes nothing',
  async (t) => {
    let outcomes: Record<number, number> = {};
    await fc.assert(
      fc.asyncProperty(anyJson, async (body) => {
        const before = await snapshot();
        const res = await call(app, 'POST', '/api/v1/listings', {
          key,
          body: JSON.stringify(body),
        });
        outcomes[res.status] = (outcomes[res.status] ?? 0) + 1;
        if (res.status >= 500) throw new Error(`${res.status} for ${JSON.stringify(body)}`);
        const after = await snapshot();
        if (res.status === 400) {
          const keys =
            body !== null && typeof body === 'object' && !Array.isArray(body)
              ? Object.keys(body)
              : [];
          const problem = validationProblem(res, new Set([...keys, ...IMPLIED]));
          if (problem)
            throw new Error(`${problem} for ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
          if (after.digest !== before.digest)
            throw new Error(`a 400 wrote rows for ${JSON.stringify(body)}`);
        } else if (res.status === 201) {
          if (after.rows !== before.rows + 1) throw new Error('a 201 did not write one row');
        } else if (res.status !== 200 && res.status !== 409) {
          throw new Error(`unexpected ${res.status} for ${JSON.stringify(body)}`);
        }
      }),
      { numRuns: 150 },
    );
    t.ok(outcomes[400]! > 0, `outcomes by status: ${JSON.stringify(outcomes)}`);
    outcomes = {};
  },
);

// ---------------------------------------------------------------------------------------------
// Valid bodies, and valid bodies with one mutation that makes them invalid at a known path.

const URL = fc
  .integer({ min: 0, max: 999 })
  .map((n) => `https://images.example.com/listings/${n}.jpg`);
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const nullableText = (max: number) => fc.option(fc.string({ maxLength: max }), { nil: null });

const validBody = fc
  .record({
    title: fc.string({ minLength: 3, maxLength: 120 }),
    price: fc.oneof(
      fc.integer({ min: 1, max: 99999999 }).map((c) => ({ price_cents: c })),
      fc.integer({ min: 1, max: 99999999 }).map((c) => ({ price_dollars: c / 100 })),
    ),
    currency: optional(fc.stringMatching(/^[a-z]{3}$/)),
    description: optional(nullableText(5000)),
    category: optional(nullableText(80)),
    brand: optional(nullableText(80)),
    size: optional(nullableText(80)),
    color: optional(nullableText(80)),
    condition: optional(
      fc.constantFrom(
        'new_with_tags',
        'new_without_tags',
        'excellent',
        'like_new',
        'good',
        'fair',
        'poor',
        null,
      ),
    ),
    tags: optional(fc.array(fc.string({ minLength: 1, maxLength: 40 }), { maxLength: 20 })),
    status: optional(fc.constantFrom('draft', 'active')),
    cover_image_url: optional(URL),
    image_urls: optional(fc.array(URL, { maxLength: 16 })),
    external_id: optional(fc.constantFrom('sku-1', 'sku-2', 'sku-3', 'sku-4')),
    impact_mode: optional(fc.boolean()),
  })
  .map(({ price, ...rest }) => {
    const body: Record<string, unknown> = { ...price };
    for (const [field, value] of Object.entries(rest)) if (value !== undefined) body[field] = value;
    // An active listing needs a photo (that rule has its own mutation below). An upsert keeps
    // the stored status, which may be active: give every body that is not a draft a photo.
    if (
      body.status !== 'draft' &&
      !body.cover_image_url &&
      !(body.image_urls as string[] | undefined)?.length
    )
      body.cover_image_url = PHOTO;
    return body;
  });

interface Mutation {
  name: string;
  /** The path (or paths) the 400 must name. */
  path: RegExp;
  apply(body: Record<string, unknown>): void;
}

const PRICE = /^\/price_(cents|dollars)$/;
const PHOTOS = /^\/(cover_image_url|image_urls)$/;
const set = (field: string, value: unknown, path = new RegExp(`^/${field}$`)): Mutation => ({
  name: `${field} = ${JSON.stringify(value)?.slice(0, 40)}`,
  path,
  apply: (body) => {
    body[field] = value;
  },
});

const MUTATIONS: Mutation[] = [
  { name: 'no title', path: /^\/title$/, apply: (b) => delete b.title },
  set('title', 'ab'),
  set('title', 'x'.repeat(121)),
  set('title', 42),
  set('title', null),
  set('title', 'nul\u0000byte'),
  set('title', 'lone \ud800 surrogate'),
  {
    name: 'no price',
    path: PRICE,
    apply: (b) => {
      delete b.price_cents;
      delete b.price_dollars;
    },
  },
  {
    name: 'both prices',
    path: PRICE,
    apply: (b) => {
      b.price_cents = 1999;
      b.price_dollars = 19.99;
    },
  },
  {
    name: 'price_cents 0',
    path: /^\/price_cents$/,
    apply: (b) => {
      delete b.price_dollars;
      b.price_cents = 0;
    },
  },
  {
    name: 'price_cents "100"',
    path: /^\/price_cents$/,
    apply: (b) => {
      delete b.price_dollars;
      b.price_cents = '100';
    },
  },
  {
    name: 'price_cents 1.5',
    path: /^\/price_cents$/,
    apply: (b) => {
      delete b.price_dollars;
      b.price_cents = 1.5;
    },
  },
  {
    name: 'price_dollars 1.005',
    path: /^\/price_dollars$/,
    apply: (b) => {
      delete b.price_cents;
      b.price_dollars = 1.005;
    },
  },
  {
    name: 'price_dollars -5',
    path: /^\/price_dollars$/,
    apply: (b) => {
      delete b.price_cents;
      b.price_dollars = -5;
    },
  },
  set('colour', 'blue'),
  set('currency', 'USD'),
  set('currency', 'us'),
  set('description', 'd'.repeat(5001)),
  set('brand', 'b'.repeat(81)),
  set('size', 7),
  set('color', ['red']),
  set('category', 'c'.repeat(81)),
  set('condition', 'mint'),
  set(
    'tags',
    Array.from({ length: 21 }, (_, i) => `t${i}`),
  ),
  set('tags', ['ok', ''], /^\/tags\/1$/),
  set('tags', ['t'.repeat(41)], /^\/tags\/0$/),
  set('tags', 'denim'),
  set('tags', ['ok', 'nul\u0000'], /^\/tags\/1$/),
  set('status', 'archived'),
  set('status', 'sold'),
  {
    name: 'active without a photo',
    path: PHOTOS,
    apply: (b) => {
      b.status = 'active';
      b.cover_image_url = null;
      b.image_urls = [];
    },
  },
  set('cover_image_url', 'ftp://images.example.com/a.jpg'),
  set('cover_image_url', 'not a url'),
  set('image_urls', ['https://images.example.com/a.jpg', 'nope'], /^\/image_urls\/1$/),
  set(
    'image_urls',
    Array.from({ length: 17 }, (_, i) => `https://images.example.com/${i}.jpg`),
  ),
  set('external_id', ''),
  set('external_id', 'e'.repeat(129)),
  set('external_id', 12),
  set('impact_mode', 'yes'),
];

t.test(
  'property: valid bodies succeed; one mutation makes a 400 that names the field and writes nothing',
  async (t) => {
    const created = new Set<string>();
    const seen: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(
        validBody,
        fc.option(fc.constantFrom(...MUTATIONS), { nil: undefined, freq: 3 }),
        async (valid, mutation) => {
          const body = structuredClone(valid);
          mutation?.apply(body);
          const before = await snapshot();
          const res = await call(app, 'POST', '/api/v1/listings', {
            key,
            body: JSON.stringify(body),
          });
          const after = await snapshot();
          const label = `${mutation?.name ?? 'valid'}: ${JSON.stringify(body).slice(0, 300)} -> ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`;
          seen[mutation ? 'mutated' : 'valid'] = (seen[mutation ? 'mutated' : 'valid'] ?? 0) + 1;
          if (res.status >= 500) throw new Error(`5xx for ${label}`);
          if (mutation) {
            if (res.status !== 400) throw new Error(`expected 400 for ${label}`);
            const problem = validationProblem(res, new Set([...Object.keys(body), ...IMPLIED]));
            if (problem) throw new Error(`${problem} for ${label}`);
            const paths: string[] = res.body.error.details.map((d: { path: string }) => d.path);
            if (!paths.some((p) => mutation.path.test(p)))
              throw new Error(
                `details ${JSON.stringify(paths)} do not name ${mutation.path} for ${label}`,
              );
            if (after.digest !== before.digest)
              throw new Error(`a 400 wrote something for ${label}`);
            return;
          }
          const externalId = body.external_id as string | undefined;
          const upsert = externalId !== undefined && created.has(externalId);
          if (res.status !== (upsert ? 200 : 201))
            throw new Error(`expected ${upsert ? 200 : 201} for ${label}`);
          if (after.rows !== before.rows + (upsert ? 0 : 1))
            throw new Error(`row count ${before.rows} -> ${after.rows} for ${label}`);
          const data: Json = res.body.data;
          if (data.title !== body.title) throw new Error(`title not stored as sent for ${label}`);
          const cents = body.price_cents ?? Math.round((body.price_dollars as number) * 100);
          if (data.price_cents !== cents)
            throw new Error(`price_cents ${data.price_cents}, expected ${cents} for ${label}`);
          for (const field of [
            'description',
            'category',
            'brand',
            'size',
            'color',
            'condition',
            'tags',
            'image_urls',
            'cover_image_url',
            'currency',
            'impact_mode',
          ]) {
            if (field in body && JSON.stringify(data[field]) !== JSON.stringify(body[field]))
              throw new Error(`${field} not stored as sent for ${label}`);
          }
          if (externalId !== undefined) created.add(externalId);
        },
      ),
      { numRuns: 150 },
    );
    t.ok((seen.valid ?? 0) > 0 && (seen.mutated ?? 0) > 0, `bodies sent: ${JSON.stringify(seen)}`);
  },
);

t.test(
  'property: PATCH with any JSON body never gets a 5xx, and a 400 writes nothing',
  async (t) => {
    const created = await call(app, 'POST', '/api/v1/listings', {
      key,
      body: { title: 'Patch target', price_cents: 500, status: 'active', cover_image_url: PHOTO },
    });
    const id: string = created.body.data.id;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          anyJson,
          validBody.map((b) => {
            delete b.title;
            delete b.external_id;
            return b;
          }),
        ),
        async (body) => {
          const before = await snapshot();
          const res = await call(app, 'PATCH', `/api/v1/listings/${id}`, {
            key,
            body: JSON.stringify(body),
          });
          if (res.status >= 500) throw new Error(`${res.status} for ${JSON.stringify(body)}`);
          if (res.status === 400) {
            const keys =
              body !== null && typeof body === 'object' && !Array.isArray(body)
                ? Object.keys(body)
                : [];
            const problem = validationProblem(
              res,
              new Set([...keys, 'cover_image_url', 'image_urls', 'price_cents', 'price_dollars']),
            );
            if (problem) throw new Error(`${problem} for ${JSON.stringify(body)}`);
            if ((await snapshot()).digest !== before.digest)
              throw new Error(`a 400 wrote something for ${JSON.stringify(body)}`);
          } else if (res.status !== 200) {
            throw new Error(
              `unexpected ${res.status} for ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`,
            );
          }
        },
      ),
      { numRuns: 100 },
    );
    t.pass('no 5xx');
  },
);

t.test('malformed JSON and non-object bodies are 400 at the whole body ("")', async (t) => {
  for (const raw of ['{', '{"title": "abc",}', 'null', '[]', '"text"', '42']) {
    const before = await snapshot();
    const res = await call(app, 'POST', '/api/v1/listings', { key, body: raw });
    t.equal(res.status, 400, `${raw}: 400`);
    t.equal(res.body.error.code, 'validation_error');
    t.same(
      res.body.error.details.map((d: { path: string }) => d.path),
      [''],
      `${raw}: details path ""`,
    );
    t.equal((await snapshot()).digest, before.digest, 'nothing written');
  }
});

t.test(
  'details paths are RFC 6901 JSON Pointers: an unknown field named "a/b" is "/a~1b"',
  async (t) => {
    for (const [name, pointer] of [
      ['a/b', '/a~1b'],
      ['a~b', '/a~0b'],
    ] as const) {
      const res = await call(app, 'POST', '/api/v1/listings', {
        key,
        body: { title: 'Escaped names', price_cents: 100, [name]: 1 },
      });
      t.equal(res.status, 400);
      t.same(
        res.body.error.details.map((d: { path: string }) => d.path),
        [pointer],
        `${name} -> ${pointer}`,
      );
    }
  },
);
