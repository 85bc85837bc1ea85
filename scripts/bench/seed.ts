/**
 * The benchmark's dataset, on a database of its own (`bench_<timestamp>`, dropped at the end):
 * migrated by the app's own code, the developer, app and sandbox key created through the
 * services (real key hashing), and the bulk rows written set-based with generate_series:
 * 100,000 listings are one statement, not 100,000 API calls.
 */
import postgres from 'postgres';
import { openDatabase } from '../../src/db/client.ts';
import { createServices } from '../../src/services.ts';

export interface SeedSizes {
  listings: number;
  sellers: number;
  sandboxListings: number;
  deepPages: number;
}

export interface Fixtures {
  /** The sandbox key of the bench developer's app (POST, PATCH, batch). */
  sandboxKey: string;
  sellerId: string;
  appId: string;
  /** published_at of the last item of page `deepPages` of the public feed (limit 24). */
  deepCursor: string;
  /** Live, active listings for GET /listings/{id}. */
  liveIds: string[];
  /** The bench developer's own sandbox listings, for PATCH. */
  ownSandboxIds: string[];
  counts: { users: number; live: number; sandbox: number; total: number };
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

const PAGE = 24;
const OWN_SANDBOX = 1000;

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

/** Migrates the database and fills it; returns what the scenarios need. */
export async function seed(url: string, sizes: SeedSizes): Promise<Fixtures> {
  const handle = await openDatabase({ databaseUrl: url, pgliteDir: '', poolSize: 2 });
  let sandboxKey: string;
  let sellerId: string;
  let appId: string;
  try {
    const services = createServices(handle.db);
    const user = await services.users.create({
      username: 'bench_dev',
      password: 'bench-password-not-secret',
      displayName: 'Bench Developer',
    });
    const app = await services.apps.create({
      ownerUsername: user.username,
      name: 'Bench app',
      redirectUris: [],
    });
    const key = await services.keys.create({ appId: app.id, env: 'sandbox' });
    sandboxKey = key.key;
    sellerId = user.id;
    appId = app.id;
  } finally {
    await handle.close();
  }

  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`
      insert into users (username, display_name, password_hash, avatar_url, bio)
      select format('seller_%s', g), format('Seller %s', g), '!bench: no sign-in',
             format('https://img.example.com/avatars/%s.jpg', g),
             'Vintage and preloved clothing, shipped within two days.'
      from generate_series(1, ${sizes.sellers}::int) g`;

    // One statement per environment. published_at: distinct per row (the feed's unique key),
    // with microseconds, spread back in time; a few live listings archived or drafts, which the
    // public feed's partial index leaves out.
    const fill = (
      environment: 'live' | 'sandbox',
      count: number,
      seller: 'spread' | string,
      appIdValue: string | null,
    ) => sql`
      with s as (
        select id, row_number() over (order by username) - 1 as n from users where username like 'seller\\_%'
      )
      insert into listings (seller_id, app_id, environment, status, title, description, category, condition, brand,
        size, color, price_cents, currency, impact_mode, cover_image_url, image_urls, tags, like_count,
        published_at, created_at, updated_at)
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
        500 + (g * 7919) % 50000, 'usd', g % 9 = 0,
        format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
        array[format('https://img.example.com/l/%s/%s/0.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/1.jpg', ${environment}::text, g),
              format('https://img.example.com/l/%s/%s/2.jpg', ${environment}::text, g)],
        array[(array['vintage', 'y2k', '90s', 'workwear', 'minimal', 'streetwear'])[1 + g % 6],
              (array['wool', 'cotton', 'linen', 'leather', 'denim'])[1 + g % 5],
              (array['sustainable', 'handmade', 'designer', 'basics'])[1 + g % 4]],
        (g * 31) % 500, t.ts, t.ts, t.ts
      from generate_series(1, ${count}::int) g
      join s on s.n = g % ${sizes.sellers}::int
      cross join lateral (select now() - g * interval '7.000123 seconds' as ts) t`;

    // The public feed: `listings` live and active, plus 2% archived or drafts on top.
    const live = sizes.listings + Math.floor(sizes.listings / 49);
    await fill('live', live, 'spread', null);
    await fill('sandbox', sizes.sandboxListings, 'spread', null);
    // The bench developer's own sandbox listings: shifted in time so published_at stays unique.
    await sql`update listings set published_at = published_at - interval '1 day' where environment = 'sandbox'`;
    await fill('sandbox', OWN_SANDBOX, sellerId, appId);
    await sql.unsafe('vacuum (analyze) users, listings, apps, api_keys');

    const [cursor] = await sql<{ at: string }[]>`
      select to_char(published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at
      from listings where environment = 'live' and status = 'active'
      order by published_at desc nulls last offset ${sizes.deepPages * PAGE - 1} limit 1`;
    const liveIds = await sql<{ id: string }[]>`
      select id from listings where environment = 'live' and status = 'active' order by md5(id::text) limit 1000`;
    const own = await sql<{ id: string }[]>`
      select id from listings where seller_id = ${sellerId} and environment = 'sandbox' order by published_at desc`;
    const [counts] = await sql<{ users: number; live: number; sandbox: number; total: number }[]>`
      select (select count(*)::int from users) as users,
             count(*) filter (where environment = 'live' and status = 'active')::int as live,
             count(*) filter (where environment = 'sandbox')::int as sandbox,
             count(*)::int as total
      from listings`;
    if (!cursor) throw new Error('the seed has too few listings for the deep page');
    return {
      sandboxKey,
      sellerId,
      appId,
      deepCursor: cursor.at,
      liveIds: liveIds.map((r) => r.id),
      ownSandboxIds: own.map((r) => r.id),
      counts: counts!,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
