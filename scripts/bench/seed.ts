/**
 * The benchmark's dataset, on a database of its own (`bench_<timestamp>`, dropped at the end):
 * migrated by the app's own code, the developers, apps and sandbox keys created through the
 * services (real key hashing), and the bulk rows written set-based with generate_series:
 * 100,000 listings are one statement, not 100,000 API calls, and 1,000,000 are too (nothing
 * the size of the table is read into this process).
 */
import postgres from 'postgres';
import { openDatabase } from '../../src/db/client.ts';
import { createServices, type Services } from '../../src/services.ts';
import { REPLAY_KEYS } from './scenarios.ts';

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
  counts: { users: number; live: number; sandbox: number; crowded: number; total: number };
  /** pg_database_size once seeded and vacuumed. */
  databaseBytes: number;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

const PAGE = 24;
const OWN_SANDBOX = 1000;
/** Seconds between two seeded listings' published_at (the fill's interval '7.000123 seconds'). */
const STEP_S = 7.000123;
const DAY_S = 86_400;
const CROWDED_PREFIX = 'crowded-';
/** The crowded seller's external_id of its g-th seeded listing (1-based). */
const crowdedExternalId = (g: number) => `${CROWDED_PREFIX}${String(g).padStart(7, '0')}`;

export function databaseUrlFor(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function createBenchDatabase(serverUrl: string): Promise<BenchDatabase> {
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const name = `bench_${stamp}_${process.pid}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  return {
    name,
    url: databaseUrlFor(serverUrl, name),
    async drop() {
      const dropper = postgres(serverUrl, { max: 1, onnotice: () => {} });
      try {
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end({ timeout: 5 });
      }
    },
  };
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

/** Migrates the database and fills it; returns what the scenarios need. */
export async function seed(url: string, sizes: SeedSizes): Promise<Fixtures> {
  const handle = await openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  let bench: Developer;
  let crowded: Developer;
  let accessToken: string;
  try {
    const services = createServices(handle.db);
    bench = await createDeveloper(services, 'bench_dev', 'Bench Developer', 'Bench app');
    crowded = await createDeveloper(
      services,
      'bench_crowded',
      'Crowded Seller',
      'Crowded inventory sync',
    );
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

    // One statement per environment and owner. published_at: distinct per row (the feed's unique
    // key per environment), with microseconds, spread back in time from `beforeS` seconds ago; a
    // few live listings archived or drafts, which the public feed's partial index leaves out.
    // Arithmetic on g is bigint where it can pass 2^31 (g * 7919 does past 271,000 rows).
    const fill = (
      environment: 'live' | 'sandbox',
      count: number,
      seller: 'spread' | string,
      appIdValue: string | null,
      beforeS = 0,
      externalIds = false,
    ) => sql`
      with s as (
        select id, row_number() over (order by username) - 1 as n from users where username like 'seller\\_%'
      )
      insert into listings (seller_id, app_id, environment, status, title, description, category, condition, brand,
        size, color, price_cents, currency, impact_mode, cover_image_url, image_urls, tags, like_count,
        external_id, published_at, created_at, updated_at)
      select ${seller === 'spread' ? sql`s.id` : sql`${seller}::uuid`}, ${appIdValue}::uuid, ${environment}::text,
        case when g % 50 = 0 and ${environment}::text = 'live' then (array['archived', 'draft'])[1 + g % 2] else 'active' end,
        (array['Vintage', 'Classic', 'Oversized', 'Cropped', 'Slim'])[1 + g % 5] || ' ' ||
          (array['denim jacket', 'wool coat', 'linen shirt', 'leather boots', 'silk scarf', 'knit sweater', 'cargo pants', 'summer dress'])[1 + g % 8]
          || ' #' || g,
        repeat('Gently worn, no stains or holes; measurements in the photos. ', 1 + g % 4),
        (array['jackets', 'coats', 'shirts', 'shoes', 'accessories', 'knitwear', 'trousers', 'dresses'])[1 + g % 8],
        (array['new_with_tags', 'new_without_tags', 'excellent', 'like_new', 'good', 'fair', 'poor'])[1 + g % 7],
        (array['Levi''s', 'Patagonia', 'COS', 'Arket', 'Dr. Martens', 'Uniqlo', null])[1 + g % 7],
        (array['XS', 'S', 'M', 'L', 'XL', '38', '42'])[1 + g % 7],
        (array['black', 'navy', 'olive', 'cream', 'rust', 'grey'])[1 + g % 6],
        500 + (g::bigint * 7919) % 50000, 'usd', g % 9 = 0,
        format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
        array[format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/1.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/2.jpg', ${environment}::text, g)],
        array[(array['vintage', 'y2k', '90s', 'workwear', 'minimal', 'streetwear'])[1 + g % 6],
              (array['wool', 'cotton', 'linen', 'leather', 'denim'])[1 + g % 5],
              (array['sustainable', 'handmade', 'designer', 'basics'])[1 + g % 4]],
        (g * 31) % 500,
        case when ${externalIds}::boolean then ${CROWDED_PREFIX}::text || lpad(g::text, 7, '0') end,
        t.ts, t.ts, t.ts
      from generate_series(1, ${count}::int) g
      join s on s.n = g % ${sizes.sellers}::int
      cross join lateral (
        select now() - ${beforeS}::int * interval '1 second' - g * interval '7.000123 seconds' as ts
      ) t`;

    // The public feed: `listings` live and active, plus 2% archived or drafts on top.
    const live = sizes.listings + Math.floor(sizes.listings / 49);
    await fill('live', live, 'spread', null);
    // Sandbox published_at is unique too, so each owner's listings get a stretch of time of
    // their own: the bench developer's in the last hours (1,000 x 7 s), the sellers' from a day
    // back, the crowded seller's from a day before those.
    await fill('sandbox', OWN_SANDBOX, sellerId, appId);
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
    await sql.unsafe('vacuum (analyze) users, listings, apps, api_keys');

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
      counts: counts!,
      databaseBytes: Number(size!.bytes),
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
