/**
 * Every single-row lookup takes its unique index whatever the planner's statistics say
 * (src/db/unique-lookups.ts, docs/architecture.md "The database"). Reproduced as production
 * looks between two analyses (autovacuum off here): the tables are analyzed while empty, then
 * one owner of each kind grows to thousands of rows (a seller's 30,000 listings, an app's keys,
 * a grant's tokens, ...), and nothing is analyzed again. Each repository's own statement is then
 * run under EXPLAIN (ANALYZE, FORMAT JSON), with custom and with generic plans: every table it
 * reads must be read through the unique index named here, a row or two at most.
 *
 * The statements are captured from the repositories (a stand-in database records what they run
 * and answers no rows), then prepared and explained in a transaction rolled back, as some of
 * them write or lock.
 */
import { sql } from 'drizzle-orm';
import t, { type Test } from 'tap';
import type { Db } from '../../src/db/client.ts';
import { drizzleOn, type Connection } from '../../src/db/database.ts';
import { queryRows } from '../../src/db/rows.ts';
import { uuidV7 } from '../../src/lib/uuid-v7.ts';
import { UsersRepository } from '../../src/accounts/users-repository.ts';
import { AppsRepository } from '../../src/apps/apps-repository.ts';
import { ListingChanges } from '../../src/listings/listing-changes.ts';
import { ListingsRepository } from '../../src/listings/listings-repository.ts';
import { OAuthRepository } from '../../src/oauth/oauth-repository.ts';
import { RequestLogsRepository } from '../../src/request-logs/request-logs-repository.ts';
import { SessionsRepository } from '../../src/web/sessions-repository.ts';
import {
  DeliveriesRepository,
  type ClaimedDelivery,
} from '../../src/webhooks/deliveries-repository.ts';
import { EndpointsRepository } from '../../src/webhooks/endpoints-repository.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';
import { timeOrderedId } from '../../src/events/outbox-partitions.ts';
import { listPartitions } from '../../src/db/partitions.ts';
import { buildTestApp } from '../helpers/app.ts';
import { explainPrepared, planNodes, type PlanNode } from '../helpers/explaining.ts';

const LISTINGS = 30_000;
const ROWS = 5_000;
/** What a lookup may read of each table: its row, and maybe one more. */
const MOST_ROWS = 2;

const app = await buildTestApp(t);
const db: Db = app.db;

const TABLES = [
  'users',
  'apps',
  'api_keys',
  'app_client_secrets',
  'listings',
  'user_sessions',
  'oauth_grants',
  'oauth_codes',
  'oauth_tokens',
  'webhook_endpoints',
  // The outbox's partitions of this week (drizzle/0016: the rows from before partitioning).
  'webhook_events_before_partitions',
  'webhook_deliveries_before_partitions',
  // The request log's partition of today (a partitioned table has no storage of its own).
  'request_logs_before_partitions',
];
for (const table of TABLES) {
  await db.execute(sql.raw(`alter table ${table} set (autovacuum_enabled = false)`));
}
// The statistics of empty tables: what the planner knows until the next ANALYZE.
await db.execute(sql`analyze`);

/** One owner of each kind, and its thousands of rows; the last row of each is looked up. */
const [seller] = await queryRows<{ id: string }>(
  db,
  sql`insert into users (username, display_name, password_hash)
      values ('big_seller', 'Big seller', 'not-a-hash') returning id`,
);
const sellerId = seller!.id;
await db.execute(sql`
  insert into users (username, display_name, password_hash)
  select 'user_' || i, 'User ' || i, 'not-a-hash' from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into apps (owner_id, name)
  select ${sellerId}::uuid, 'App ' || i from generate_series(1, ${ROWS}::int) as i`);
const [app1] = await queryRows<{ id: string }>(
  db,
  sql`insert into apps (owner_id, name) values (${sellerId}, 'The app') returning id`,
);
const appId = app1!.id;
await db.execute(sql`
  insert into api_keys (app_id, environment, key_hash, prefix, scopes)
  select ${appId}::uuid, 'sandbox', 'key-hash-' || i, 'svc_sandbox_', '{read}'
  from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into app_client_secrets (app_id, secret_hash, prefix, revoked_at)
  select ${appId}::uuid, 'secret-hash-' || i, 'svc_cs_', case when i < ${ROWS}::int then now() end
  from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into listings (seller_id, environment, status, title, price_cents, external_id, published_at)
  select ${sellerId}::uuid, 'sandbox', 'draft', 'Item ' || i, 100 + i, 'ext-' || i,
         timestamptz '2020-01-01 00:00:00Z' - i * interval '1 microsecond'
  from generate_series(1, ${LISTINGS}::int) as i`);
await db.execute(sql`
  insert into user_sessions (token_hash, user_id, expires_at)
  select 'session-hash-' || i, ${sellerId}::uuid, now() + interval '1 day'
  from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into oauth_grants (app_id, user_id, scopes)
  select ${appId}::uuid, ${sellerId}::uuid, '{read}' from generate_series(1, ${ROWS}::int) as i`);
const [grant] = await queryRows<{ id: string }>(
  db,
  sql`insert into oauth_grants (app_id, user_id, scopes) values (${appId}, ${sellerId}, '{read}')
      returning id`,
);
const grantId = grant!.id;
await db.execute(sql`
  insert into oauth_codes (code_hash, grant_id, redirect_uri, scopes, expires_at)
  select 'code-hash-' || i, ${grantId}::uuid, 'https://example.com/cb', '{read}', now() + interval '10 minutes'
  from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into oauth_tokens (grant_id, kind, token_hash, scopes, expires_at)
  select ${grantId}::uuid, case when i % 2 = 0 then 'access' else 'refresh' end, 'token-hash-' || i,
         '{read}', now() + interval '1 hour'
  from generate_series(1, ${ROWS}::int) as i`);
await db.execute(sql`
  insert into webhook_endpoints (app_id, environment, url, secret)
  select ${appId}::uuid, 'sandbox', 'https://example.com/hook/' || i, 'svc_whsec_x'
  from generate_series(1, ${ROWS}::int) as i`);
const [endpoint] = await queryRows<{ id: string }>(
  db,
  sql`select id from webhook_endpoints order by url desc limit 1`,
);
const endpointId = endpoint!.id;
await db.execute(sql`
  insert into webhook_events (id, app_id, environment, type, data, created_at)
  select ${timeOrderedId(sql`t.at`, sql`md5(i::text)`)}, ${appId}::uuid, 'sandbox', 'listing.updated',
         '{}', t.at
  from generate_series(1, ${ROWS}::int) as i
  cross join lateral (select now() - i * interval '1 millisecond' as at) t`);
await db.execute(sql`
  insert into webhook_deliveries (id, event_id, endpoint_id, status, event_created_at)
  select ${timeOrderedId(sql`e.created_at`, sql`md5(e.id)`)}, e.id, ${endpointId}::uuid, 'succeeded',
         e.created_at
  from webhook_events e`);
/** The oldest event (the last made) and its delivery. */
const [lastEvent] = await queryRows<{ id: string; delivery_id: string; at: string }>(
  db,
  sql`select e.id, d.id as delivery_id, d.event_created_at::text as at
      from webhook_events e join webhook_deliveries d on d.event_id = e.id
      order by e.created_at limit 1`,
);
const [key] = await queryRows<{ id: string }>(
  db,
  sql`select id from api_keys where key_hash = ${`key-hash-${ROWS}`}`,
);
await db.execute(sql`
  insert into request_logs (app_id, environment, method, path, status, latency_ms, request_id, key_id)
  select ${appId}::uuid, 'sandbox', 'GET', '/api/v1/listings', 200, 1, 'req-' || i, ${key!.id}::uuid
  from generate_series(1, ${ROWS}::int) as i`);

const idOf = async (query: ReturnType<typeof sql>) =>
  (await queryRows<{ id: string }>(db, query))[0]!.id;
const listingId = await idOf(sql`select id from listings where external_id = ${`ext-${LISTINGS}`}`);
// As the log writes its ids since partitioning: a UUIDv7 of the request's time.
const logAt = Date.now();
const logId = uuidV7(logAt);
await db.execute(sql`
  update request_logs set id = ${logId}, created_at = ${new Date(logAt).toISOString()}
  where request_id = ${`req-${ROWS}`}`);
const keyId = key!.id;
const last = `${ROWS}`;

/* ------------------------------------------------------------------ capturing and explaining */

interface Captured {
  sql: string;
  params: unknown[];
}

/**
 * A stand-in for the database that records each statement a repository runs (raw SQL, a
 * RenderedSql, or Drizzle's query builder: all of them reach the Connection, src/db/database.ts)
 * and answers no rows.
 */
function capturing(sink: Captured[]): Db {
  const connection: Connection = {
    query: async (text, params) => {
      sink.push({ sql: text, params });
      return [];
    },
    transaction: (work) => work(connection),
  };
  return drizzleOn(connection);
}

class RollBack extends Error {}

/**
 * The plans of the statements `lookup` runs, each prepared and EXPLAIN ANALYZE'd under
 * `mode`, in a transaction rolled back.
 */
async function plansOf(
  mode: 'force_custom_plan' | 'force_generic_plan',
  lookup: (db: Db) => Promise<unknown>,
): Promise<{ sql: string; plan: PlanNode }[]> {
  const captured: Captured[] = [];
  await lookup(capturing(captured));
  const plans: { sql: string; plan: PlanNode }[] = [];
  await db
    .transaction(async (tx) => {
      for (const statement of captured)
        plans.push({ sql: statement.sql, plan: await explainPrepared(tx, statement, mode) });
      throw new RollBack();
    })
    .catch((err) => {
      if (!(err instanceof RollBack)) throw err;
    });
  return plans;
}

/**
 * Checks that every table the lookup's statements read is read by the index `indexes` names
 * for it (Index Scan or Index Only Scan), `MOST_ROWS` rows at most.
 */
async function check(
  t: Test,
  indexes: Record<string, string | null>,
  lookup: (db: Db) => Promise<unknown>,
  extra: Record<string, unknown> = {},
): Promise<void> {
  for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
    const plans = await plansOf(mode, lookup);
    t.ok(plans.length > 0, `${mode}: the lookup ran a statement`);
    for (const { sql: text, plan } of plans) {
      const scans = planNodes(plan).filter(
        (n) => n['Relation Name'] !== undefined && n['Node Type'] !== 'ModifyTable',
      );
      const seen = new Set<string>();
      for (const scan of scans) {
        const table = scan['Relation Name']!;
        seen.add(table);
        const label = `${mode}, ${table}`;
        const read =
          (scan['Actual Rows'] +
            (scan['Rows Removed by Filter'] ?? 0) +
            (scan['Rows Removed by Index Recheck'] ?? 0)) *
          scan['Actual Loops'];
        if (indexes[table] === null) {
          // An empty partition (a week made ahead): whatever the scan, it reads nothing.
          t.equal(read, 0, `${label}: an empty partition, nothing read`, { sql: text, ...extra });
          continue;
        }
        // A bitmap scan of the one index is a seek too (PostgreSQL chooses it for a partial one).
        const index =
          scan['Node Type'] === 'Bitmap Heap Scan'
            ? scan.Plans?.find((n) => n['Node Type'] === 'Bitmap Index Scan')?.['Index Name']
            : scan['Index Name'];
        t.ok(
          ['Index Scan', 'Index Only Scan', 'Bitmap Heap Scan'].includes(scan['Node Type']),
          `${label}: ${scan['Node Type']} ${index ?? ''} is an index scan`,
          { sql: text, ...extra },
        );
        t.equal(index, indexes[table], `${label}: by its unique index`, {
          sql: text,
          ...extra,
        });
        t.ok(read <= MOST_ROWS, `${label}: ${read} row(s) read`, { sql: text, ...extra });
      }
      t.ok(
        Object.keys(indexes).some((table) => seen.has(table)),
        `${mode}: the plan reads the tables named`,
        { sql: text, seen: [...seen], ...extra },
      );
    }
  }
}

/* ------------------------------------------------------------------ the lookups */

const LISTING = { listings: 'listings_pkey', users: 'users_pkey' };

t.test('a listing by id, its versions; an update by id', async (t) => {
  await check(t, LISTING, (d) => new ListingsRepository(d).findById(listingId));
  await check(t, LISTING, (d) => new ListingsRepository(d).versionById(listingId));
  await check(t, LISTING, (d) =>
    new ListingsRepository(d).update(
      { id: listingId, sellerId, environment: 'sandbox' },
      { title: 'Renamed' },
      'listing.updated',
      new ListingChanges([]),
    ),
  );
});

t.test('a listing by external_id (upserts, Idempotency-Key replays)', async (t) => {
  const key = {
    listings: 'listings_seller_environment_external_id_key',
    users: 'users_pkey',
  };
  // The unique index leads with external_id (drizzle/0013): the seller's other indexes cannot
  // serve a lookup that names external_id alone as a plain equality.
  await check(t, key, (d) =>
    new ListingsRepository(d).findByExternalIds({ sellerId, environment: 'sandbox' }, [
      `ext-${LISTINGS}`,
    ]),
  );
});

t.test('users, sessions, apps, API keys, the client secret', async (t) => {
  await check(t, { users: 'users_pkey' }, (d) => new UsersRepository(d).findById(sellerId));
  await check(t, { users: 'users_username_key' }, (d) =>
    new UsersRepository(d).findByUsername(`user_${last}`),
  );
  await check(t, { user_sessions: 'user_sessions_pkey', users: 'users_pkey' }, (d) =>
    new SessionsRepository(d).findUser(`session-hash-${last}`),
  );
  await check(t, { apps: 'apps_pkey', users: 'users_pkey' }, (d) =>
    new AppsRepository(d).findById(appId),
  );
  await check(t, { api_keys: 'api_keys_hash_key', apps: 'apps_pkey' }, (d) =>
    new AppsRepository(d).findActiveKeyByHash(`key-hash-${last}`),
  );
  await check(t, { api_keys: 'api_keys_pkey' }, (d) => new AppsRepository(d).findKeyById(keyId));
  await check(t, { app_client_secrets: 'app_client_secrets_one_active' }, (d) =>
    new AppsRepository(d).activeClientSecretHash(appId),
  );
});

t.test('OAuth: access and refresh tokens, authorization codes', async (t) => {
  const tokens = { oauth_tokens: 'oauth_tokens_hash_key', oauth_grants: 'oauth_grants_pkey' };
  await check(t, { ...tokens, apps: 'apps_pkey' }, (d) =>
    new OAuthRepository(d).findLiveAccessToken(`token-hash-${last}`),
  );
  await check(t, tokens, (d) => new OAuthRepository(d).lockToken(`token-hash-${ROWS - 1}`, d));
  await check(t, tokens, (d) => new OAuthRepository(d).findToken(`token-hash-${ROWS - 1}`));
  await check(t, { oauth_codes: 'oauth_codes_pkey', oauth_grants: 'oauth_grants_pkey' }, (d) =>
    new OAuthRepository(d).findCodeForUpdate(`code-hash-${last}`, d),
  );
});

t.test('webhooks: an endpoint, an event, a delivery; the request log', async (t) => {
  await check(t, { webhook_endpoints: 'webhook_endpoints_pkey' }, (d) =>
    new EndpointsRepository(d).findById(endpointId),
  );
  // The partition of the id's time (the rows from before partitioning, on a new database:
  // drizzle/0016) by its own index on id. Here a lookup gets no rows back, and so looks again as
  // for an id from before partitioning: the weeks made ahead are read too, and are empty
  // (test/db/outbox-partitions.test.ts checks that a found id reads one partition).
  const byId = async (table: string) =>
    Object.fromEntries(
      (await listPartitions(db, table)).map((p) => [
        p.name,
        p.from === null ? `${p.name}_id_idx` : null,
      ]),
    );
  const events = await byId('webhook_events');
  const deliveries = await byId('webhook_deliveries');
  await check(t, events, (d) => new EventsRepository(d).findById(lastEvent!.id));
  await check(t, { ...deliveries, ...events }, (d) =>
    new DeliveriesRepository(d).find(lastEvent!.delivery_id),
  );
  const claim = {
    id: lastEvent!.delivery_id,
    attempts: 1,
    event_created_at: lastEvent!.at,
  } as ClaimedDelivery;
  await check(t, deliveries, (d) => new DeliveriesRepository(d).withdraw(claim));
  await check(
    t,
    {
      // The one partition of the id's time: the rows from before partitioning, on a new database.
      request_logs_before_partitions: 'request_logs_before_partitions_id_idx',
      api_keys: 'api_keys_pkey',
      users: 'users_pkey',
    },
    (d) => new RequestLogsRepository(d).find(appId, logId),
  );
});
