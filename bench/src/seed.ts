/**
 * The benchmark's dataset, on a database of its own (`bench_<timestamp>`, dropped at the end):
 * migrated by the app's own code, the developers, apps and sandbox keys created through the
 * services (real key hashing), and the bulk rows written set-based with generate_series:
 * 100,000 listings are one statement, not 100,000 API calls, and 1,000,000 are too (nothing
 * the size of the table is read into this process).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import postgres from 'postgres';
import { openDatabase } from '../../src/db/client.ts';
import { createServices, type Services } from '../../src/services.ts';
import { REPLAY_KEYS } from './replay-keys.ts';
import {
  ATTRIBUTE_TAGS,
  BRANDS,
  COLORS,
  CONDITIONS,
  SIZES,
  COMMON_WORD,
  FILTERED_SEARCH,
  MIDDLE_WORD,
  RARE_WORD,
  DETAILS,
  MATERIALS,
  NOUNS,
  STYLE_TAGS,
  STYLES,
} from './vocabulary.ts';

export interface SeedSizes {
  listings: number;
  sellers: number;
  sandboxListings: number;
  crowdedListings: number;
  deepPages: number;
}

/** A developer made through the services: its user (the seller), app and sandbox key. */
export interface Developer {
  sandboxKey: string;
  sellerId: string;
  appId: string;
}

export interface Fixtures {
  /** The sandbox key of the bench developer's app (POST, PATCH, batch). */
  sandboxKey: string;
  sellerId: string;
  appId: string;
  /** An OAuth access token (read) a user issued to that app. */
  accessToken: string;
  /** published_at of the last item of page `deepPages` of the public feed (limit 24). */
  deepCursor: string;
  /** Live, active listings for GET /listings/{id}. */
  liveIds: string[];
  /** The bench developer's own sandbox listings, for PATCH. */
  ownSandboxIds: string[];
  /**
   * A second developer whose seller holds `crowdedListings` sandbox listings, each with an
   * external_id; `replayKeys` are REPLAY_KEYS of them, spread over its inventory.
   */
  crowded: Developer & { replayKeys: string[] };
  /** A third developer whose seller has nothing: the mixed load's (issue #35 item 4). */
  mixed: Developer;
  counts: { users: number; live: number; sandbox: number; crowded: number; total: number };
  /** The sync scenario's updated_since: a day before the seed. */
  syncSince: string;
  /** Live, active listings matching each scenario word (`q`), and the bench seller's drafts. */
  matches: { word: string; listings: number }[];
  ownDrafts: number;
  /** pg_database_size once seeded and vacuumed. */
  databaseBytes: number;
  /** A seller of the spread (about listings / sellers live listings): seller=<username>. */
  oneSeller: string;
  /** A seller with no live listing (the crowded one's sandbox inventory only). */
  nothingPublicSeller: string;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

const PAGE = 24;
const OWN_SANDBOX = 1000;
/** Every fifth of the bench seller's own listings is a draft (the owner view's status=draft). */
const OWN_DRAFT_EVERY = 5;
/** Seconds between two seeded listings' published_at (the fill's interval '7.000123 seconds'). */
const STEP_S = 7.000123;
const DAY_S = 86_400;
const CROWDED_PREFIX = 'crowded-';
const CROWDED_USERNAME = 'bench_crowded';
/** The crowded seller's external_id of its g-th seeded listing (1-based). */
const crowdedExternalId = (g: number) => `${CROWDED_PREFIX}${String(g).padStart(7, '0')}`;

/**
 * The first part of every database name the bench commands create (`bench_<timestamp>_<pid>`,
 * `bench_reuse_<digest>`): BENCH_DATABASE_PREFIX sets another, so runs of several checkouts on
 * one shared PostgreSQL server each create and drop only databases of their own names.
 */
export function databasePrefix(env: Record<string, string | undefined> = process.env): string {
  const prefix = env.BENCH_DATABASE_PREFIX || 'bench';
  if (!/^[a-z][a-z0-9_]{0,30}$/.test(prefix))
    throw new Error(`BENCH_DATABASE_PREFIX must be a lower-case identifier, got "${prefix}"`);
  return prefix;
}

export function databaseUrlFor(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function createBenchDatabase(serverUrl: string): Promise<BenchDatabase> {
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const name = `${databasePrefix()}_${stamp}_${process.pid}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  return {
    name,
    url: databaseUrlFor(serverUrl, name),
    drop: () => dropDatabase(serverUrl, name),
  };
}

async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const dropper = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await dropper.unsafe(`drop database if exists "${name}" with (force)`);
  } finally {
    await dropper.end({ timeout: 5 });
  }
}

async function createDeveloper(
  services: Services,
  username: string,
  displayName: string,
  appName: string,
): Promise<Developer> {
  const user = await services.users.create({
    username,
    password: 'bench-password-not-secret',
    displayName,
  });
  const app = await services.apps.create({
    ownerUsername: user.username,
    name: appName,
    redirectUris: [BENCH_REDIRECT_URI],
  });
  const key = await services.keys.create({ appId: app.id, env: 'sandbox' });
  return { sandboxKey: key.key, sellerId: user.id, appId: app.id };
}

const BENCH_REDIRECT_URI = 'https://bench.example.com/callback';

/**
 * An access token (read) of a user who authorized the app, as the authorization code flow
 * issues it (the browser's part, consent, is what test/oauth covers).
 */
async function authorizeApp(services: Services, appId: string): Promise<string> {
  const reader = await services.users.create({
    username: 'bench_reader',
    password: 'bench-password-not-secret',
    displayName: 'Bench Reader',
  });
  const code = await services.oauth.issueCode({
    clientId: appId,
    userId: reader.id,
    redirectUri: BENCH_REDIRECT_URI,
    scopes: ['read'],
    codeChallenge: null,
  });
  const tokens = await services.oauth.exchangeCode({
    clientId: appId,
    code,
    redirectUri: BENCH_REDIRECT_URI,
    codeVerifier: undefined,
  });
  return tokens.accessToken;
}

/**
 * A developer made for one run (its username unique to it): a seller with nothing, however
 * often a kept database is reused (the mixed load's, the stale-statistics runs').
 */
export async function createRunDeveloper(url: string, username: string): Promise<Developer> {
  const handle = await openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  try {
    return await createDeveloper(createServices(handle.db), username, username, `${username} app`);
  } finally {
    await handle.close();
  }
}

/**
 * Migrates the database and fills it; returns what the scenarios need. `analyze` false: the
 * seed ends with VACUUM alone, leaving the planner no statistics of the bulk rows (a restore
 * that nobody analyzed, on a server without autovacuum: the stale-statistics case).
 */
export async function seed(
  url: string,
  sizes: SeedSizes,
  { analyze = true }: { analyze?: boolean } = {},
): Promise<Fixtures> {
  const handle = await openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  let bench: Developer;
  let crowded: Developer;
  let mixed: Developer;
  let accessToken: string;
  try {
    const services = createServices(handle.db);
    bench = await createDeveloper(services, 'bench_dev', 'Bench Developer', 'Bench app');
    crowded = await createDeveloper(
      services,
      CROWDED_USERNAME,
      'Crowded Seller',
      'Crowded inventory sync',
    );
    mixed = await createDeveloper(services, 'bench_mixed', 'Mixed Load Seller', 'Mixed load');
    accessToken = await authorizeApp(services, bench.appId);
  } finally {
    await handle.close();
  }
  const { sandboxKey, sellerId, appId } = bench;

  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`
      insert into users (username, display_name, password_hash, avatar_url, bio)
      select format('seller_%s', g), format('Seller %s', g), '!bench: no sign-in',
             format('https://img.example.com/avatars/%s.jpg', g),
             'Vintage and preloved clothing, shipped within two days.'
      from generate_series(1, ${sizes.sellers}::int) g`;

    // The vocabulary's draw (vocabulary.ts): the 1-based index of a slot's word, floor((n+1)^u)
    // with u a hash of the row, its fill (salt) and the slot: deterministic, no state, set-based.
    await sql.unsafe(`
      create function bench_u(g bigint, slot int) returns float8
        language sql immutable parallel safe
        as $$ select (hashint8(g * 64 + slot)::bigint + 2147483648) / 4294967296.0 $$;
      create function bench_word(words text[], g bigint, slot int) returns text
        language sql immutable parallel safe
        as $$ select words[least(cardinality(words),
                floor(power(cardinality(words) + 1, bench_u(g, slot)))::int)] $$`);

    // One statement per environment and owner. published_at: distinct per row (the feed's unique
    // key per environment), with microseconds, spread back in time from `beforeS` seconds ago; a
    // few live listings archived or drafts, which the public feed's partial index leaves out, and
    // every `draftEvery`-th of the bench seller's a draft (the owner view's). A title is a style,
    // a third of the time a detail word, a colour, a material and a noun (its category's), each
    // skewed (vocabulary.ts); a tenth of listings have no brand; condition and size skewed too,
    // and no listing is `poor` and no live one in impact mode (the worst-case searches' filters
    // that match nothing: scenarios.ts NO_MATCH). updated_at: three in ten were
    // changed again since, at a time between their publication and now (the sync feed's order).
    // Arithmetic on g is bigint where it can pass 2^31 (g * 7919 does past 271,000 rows).
    let salt = 0;
    const words = (list: readonly string[]) => sql`${list as string[]}::text[]`;
    const fill = (
      environment: 'live' | 'sandbox',
      count: number,
      seller: 'spread' | string,
      appIdValue: string | null,
      beforeS = 0,
      externalIds = false,
      draftEvery = 0,
    ) => sql`
      with s as (
        select id, row_number() over (order by username) - 1 as n from users where username like 'seller\\_%'
      )
      insert into listings (seller_id, app_id, environment, status, title, description, category, condition, brand,
        size, color, price_cents, currency, impact_mode, cover_image_url, image_urls, tags, like_count,
        external_id, published_at, created_at, updated_at)
      select ${seller === 'spread' ? sql`s.id` : sql`${seller}::uuid`}, ${appIdValue}::uuid, ${environment}::text,
        case when g % 50 = 0 and ${environment}::text = 'live' then (array['archived', 'draft'])[1 + g % 2]
             when ${draftEvery}::int > 0 and g % ${draftEvery}::int = 0 then 'draft'
             else 'active' end,
        initcap(left(w.style, 1)) || substr(w.style, 2) || ' ' || coalesce(w.detail || ' ', '')
          || w.color || ' ' || w.material || ' ' || (${words(NOUNS.map(([noun]) => noun))})[w.noun],
        repeat('Gently worn, no stains or holes; measurements in the photos. ', 1 + g % 4),
        (${words(NOUNS.map(([, category]) => category))})[w.noun],
        bench_word(${words(CONDITIONS)}, h, 13),
        case when bench_u(h, 7) >= 0.1 then bench_word(${words(BRANDS)}, h, 8) end,
        bench_word(${words(SIZES)}, h, 14),
        w.color,
        500 + (g::bigint * 7919) % 50000, 'usd', g % 9 = 0 and ${environment}::text = 'sandbox',
        format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
        array[format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/1.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/2.jpg', ${environment}::text, g)],
        array[bench_word(${words(STYLE_TAGS)}, h, 9), w.material, bench_word(${words(ATTRIBUTE_TAGS)}, h, 10)],
        (g * 31) % 500,
        case when ${externalIds}::boolean then ${CROWDED_PREFIX}::text || lpad(g::text, 7, '0') end,
        t.ts, t.ts,
        case when bench_u(h, 11) < 0.3 then t.ts + (now() - t.ts) * bench_u(h, 12) else t.ts end
      from generate_series(1, ${count}::int) g
      join s on s.n = g % ${sizes.sellers}::int
      cross join lateral (
        select now() - ${beforeS}::int * interval '1 second' - g * interval '7.000123 seconds' as ts,
               g::bigint + ${(salt += 1)}::bigint * 4294967296 as h
      ) t
      cross join lateral (
        select bench_word(${words(STYLES)}, h, 1) as style,
               case when bench_u(h, 2) < 0.35 then bench_word(${words(DETAILS)}, h, 3) end as detail,
               bench_word(${words(COLORS)}, h, 4) as color,
               bench_word(${words(MATERIALS)}, h, 5) as material,
               least(${NOUNS.length}::int, floor(power(${NOUNS.length + 1}::int, bench_u(h, 6)))::int) as noun
      ) w`;

    // The text index is built once after the bulk rows, as a restore does: kept up row by row
    // (a GIN entry per word of every row) it cost more than the rows. Its definition as migrated.
    const gins = await sql<{ name: string; definition: string }[]>`
      select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_am a on a.oid = c.relam
      where i.indrelid = 'listings'::regclass and a.amname = 'gin'`;
    for (const gin of gins) await sql.unsafe(`drop index ${gin.name}`);

    // The public feed: `listings` live and active, plus 2% archived or drafts on top.
    const live = sizes.listings + Math.floor(sizes.listings / 49);
    await fill('live', live, 'spread', null);
    // Sandbox published_at is unique too, so each owner's listings get a stretch of time of
    // their own: the bench developer's in the last hours (1,000 x 7 s), the sellers' from a day
    // back, the crowded seller's from a day before those.
    await fill('sandbox', OWN_SANDBOX, sellerId, appId, 0, false, OWN_DRAFT_EVERY);
    await fill('sandbox', sizes.sandboxListings, 'spread', null, DAY_S);
    const crowdedBeforeS = 2 * DAY_S + Math.ceil(sizes.sandboxListings * STEP_S);
    await fill(
      'sandbox',
      sizes.crowdedListings,
      crowded.sellerId,
      crowded.appId,
      crowdedBeforeS,
      true,
    );
    for (const gin of gins) await sql.unsafe(gin.definition);
    await sql.unsafe(`vacuum ${analyze ? '(analyze) ' : ''}users, listings, apps, api_keys`);

    const [cursor] = await sql<{ at: string }[]>`
      select to_char(published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at
      from listings where environment = 'live' and status = 'active'
      order by published_at desc nulls last offset ${sizes.deepPages * PAGE - 1} limit 1`;
    const liveIds = await sql<{ id: string }[]>`
      select id from listings where environment = 'live' and status = 'active' order by md5(id::text) limit 1000`;
    const own = await sql<{ id: string }[]>`
      select id from listings where seller_id = ${sellerId} and environment = 'sandbox' order by published_at desc`;
    const [counts] = await sql<Fixtures['counts'][]>`
      select (select count(*)::int from users) as users,
             count(*) filter (where environment = 'live' and status = 'active')::int as live,
             count(*) filter (where environment = 'sandbox')::int as sandbox,
             count(*) filter (where seller_id = ${crowded.sellerId})::int as crowded,
             count(*)::int as total
      from listings`;
    // The crowded seller's replay keys: REPLAY_KEYS of its external_ids, evenly spread.
    const replayKeys = Array.from({ length: REPLAY_KEYS }, (_, i) =>
      crowdedExternalId(1 + Math.floor((i * sizes.crowdedListings) / REPLAY_KEYS)),
    );
    const [found] = await sql<{ n: number }[]>`
      select count(*)::int as n from listings
      where seller_id = ${crowded.sellerId} and environment = 'sandbox' and external_id = any(${replayKeys})`;
    // One pass over the public listings (a sequential scan: it counts every match).
    const matching = (word: string) =>
      sql`count(*) filter (where search @@ websearch_to_tsquery('english', ${word}))::int`;
    const [matched] = await sql<
      { common: number; filtered: number; middle: number; rare: number; drafts: number }[]
    >`
      select ${matching(COMMON_WORD)} as common, ${matching(FILTERED_SEARCH.q)} as filtered,
             ${matching(MIDDLE_WORD)} as middle, ${matching(RARE_WORD)} as rare,
             (select count(*)::int from listings where seller_id = ${sellerId} and status = 'draft') as drafts
      from listings where environment = 'live' and status = 'active'`;
    const [size] = await sql<{ bytes: string }[]>`
      select pg_database_size(current_database())::text as bytes`;
    if (!cursor) throw new Error('the seed has too few listings for the deep page');
    if (found?.n !== REPLAY_KEYS)
      throw new Error(`the crowded seller holds ${found?.n} of its ${REPLAY_KEYS} replay keys`);
    return {
      sandboxKey,
      sellerId,
      appId,
      accessToken,
      deepCursor: cursor.at,
      liveIds: liveIds.map((r) => r.id),
      ownSandboxIds: own.map((r) => r.id),
      crowded: { ...crowded, replayKeys },
      mixed,
      counts: counts!,
      syncSince: new Date(Date.now() - DAY_S * 1000).toISOString(),
      matches: [
        { word: COMMON_WORD, listings: matched!.common },
        { word: FILTERED_SEARCH.q, listings: matched!.filtered },
        { word: MIDDLE_WORD, listings: matched!.middle },
        { word: RARE_WORD, listings: matched!.rare },
      ],
      ownDrafts: matched!.drafts,
      databaseBytes: Number(size!.bytes),
      oneSeller: 'seller_1',
      nothingPublicSeller: CROWDED_USERNAME,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * `--reuse`: the database of this seed's code and sizes, kept between runs so a rerun skips the
 * seeding (a minute or two at 1,000,000 listings). Its name is a digest of the seed's source
 * files and sizes, so a changed seed gets a database of its own; the fixtures (keys included)
 * are kept in it, in a table of the bench's (`bench_fixtures`) the app never reads.
 */
export function reuseName(sizes: SeedSizes, analyze: boolean): string {
  const sources = ['seed.ts', 'vocabulary.ts', 'replay-keys.ts'].map((file) =>
    readFileSync(new URL(file, import.meta.url), 'utf8'),
  );
  const { listings, sellers, sandboxListings, crowdedListings, deepPages } = sizes;
  const digest = createHash('sha256')
    .update(JSON.stringify([sources, listings, sellers, sandboxListings, crowdedListings]))
    .update(JSON.stringify([deepPages, analyze]))
    .digest('hex');
  return `${databasePrefix()}_reuse_${digest.slice(0, 12)}`;
}

/**
 * The kept database `name` and its seed's fixtures; a database without them (a seed that was
 * interrupted) is dropped and created again empty, to be seeded.
 */
export async function openKeptDatabase(
  serverUrl: string,
  name: string,
): Promise<{ database: BenchDatabase; kept: { fixtures: Fixtures; seedMs: number } | null }> {
  const url = databaseUrlFor(serverUrl, name);
  const database: BenchDatabase = { name, url, drop: () => dropDatabase(serverUrl, name) };
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    const [found] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_database where datname = ${name}`;
    if (found?.n) {
      const kept = await readFixtures(url);
      if (kept) return { database, kept };
      await admin.unsafe(`drop database "${name}" with (force)`);
    }
    await admin.unsafe(`create database "${name}"`);
    return { database, kept: null };
  } finally {
    await admin.end({ timeout: 5 });
  }
}

async function readFixtures(url: string): Promise<{ fixtures: Fixtures; seedMs: number } | null> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [table] = await sql<{ t: string | null }[]>`
      select to_regclass('bench_fixtures')::text as t`;
    if (!table?.t) return null;
    const [row] = await sql<{ fixtures: Fixtures; seed_ms: number }[]>`
      select fixtures, seed_ms from bench_fixtures limit 1`;
    if (!row) return null;
    // The sync scenario's updated_since is a day before the run, not before the seed.
    const syncSince = new Date(Date.now() - DAY_S * 1000).toISOString();
    return { fixtures: { ...row.fixtures, syncSince }, seedMs: row.seed_ms };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Records a finished seed in its database, for the next `--reuse` run. */
export async function keepFixtures(url: string, fixtures: Fixtures, seedMs: number): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`create table bench_fixtures (fixtures jsonb not null, seed_ms float8 not null)`;
    await sql`insert into bench_fixtures ${sql({ fixtures: sql.json(fixtures as never), seed_ms: seedMs })}`;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
