/**
 * Drizzle schema: the one description of the tables (with src/db/outbox-schema.ts, the webhook
 * outbox, and src/db/primary-request-log-schema.ts, the request log). `npm run db:generate`
 * turns changes into a SQL migration under drizzle/, applied automatically at start on both
 * drivers.
 */
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  customType,
  index,
  integer,
  jsonb,
  pgSequence,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { MADE_VIA } from '../lib/made-by.ts';
import { APP_ROLES } from '../lib/roles.ts';

/** PostgreSQL's full-text document type (drizzle has no built-in column for it). */
const tsvector = customType<{ data: string }>({ dataType: () => 'tsvector' });

/**
 * The values behind listings' published_at and events' created_at (src/db/ordering-key.ts).
 * CACHE 1 (the default) on purpose: values handed out in per-session blocks would let values a
 * thousand apart be taken moments apart.
 */
export const listingsPublishedSeq = pgSequence('listings_published_seq');

const createdAt = () =>
  timestamp('created_at', { withTimezone: true, precision: 6 }).notNull().defaultNow();

export const users = pgTable(
  'users',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    username: text('username').notNull(),
    displayName: text('display_name').notNull(),
    email: text('email'),
    passwordHash: text('password_hash').notNull(),
    avatarUrl: text('avatar_url'),
    bio: text('bio'),
    /** Microseconds kept: the API shows timestamps at full stored precision. */
    createdAt: timestamp('created_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
  },
  (t) => [
    uniqueIndex('users_username_key').on(t.username),
    check('users_username_format', sql`${t.username} ~ '^[a-z0-9_]{3,30}$'`),
  ],
);

export const apps = pgTable(
  'apps',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    ownerId: uuid('owner_id')
      .notNull()
      .references(() => users.id),
    name: text('name').notNull(),
    productionApproved: boolean('production_approved').notNull().default(false),
    productionApprovedAt: timestamp('production_approved_at', { withTimezone: true }),
    productionRequestedAt: timestamp('production_requested_at', { withTimezone: true }),
    createdAt: createdAt(),
    /** A deleted app keeps its row (its events and logs age out); nothing of it works any more. */
    deletedAt: timestamp('deleted_at', { withTimezone: true }),
  },
  (t) => [index('apps_owner_idx').on(t.ownerId)],
);

/**
 * The people of an app, one role each (src/access.ts decides what a role may do). apps.owner_id
 * stays the developer account the app belongs to: the one its API keys act as (the seller of
 * their listings), whose quotas and fair shares (webhook deliveries, long-poll places, matcher
 * budgets) its use counts against. That account is always an `owner` member, and cannot be
 * removed or demoted (AppsService); other members come and go, and the portal reads this table
 * on every request, so a removed member's next request is refused.
 */
export const appMembers = pgTable(
  'app_members',
  {
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    role: text('role', { enum: APP_ROLES }).notNull(),
    /** Who added them (null: the app's creation, the admin CLI or the migration from owner_id). */
    addedBy: uuid('added_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.appId, t.userId] }),
    index('app_members_user_idx').on(t.userId),
    check('app_members_role', sql.raw(`role in (${APP_ROLES.map((r) => `'${r}'`).join(', ')})`)),
  ],
);

/**
 * Invitations to an app, by username (src/apps/apps-service.ts): pending until the invitee
 * accepts or declines, an admin revokes it, or it expires (7 days); kept afterwards with how it
 * ended. At most one open (unresolved) invitation per app and user.
 */
export const appInvitations = pgTable(
  'app_invitations',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    role: text('role', { enum: APP_ROLES }).notNull(),
    invitedBy: uuid('invited_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    /** null while open; then accepted, declined, revoked or expired (an expired one replaced). */
    resolution: text('resolution', {
      enum: ['accepted', 'declined', 'revoked', 'expired'],
    }),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('app_invitations_open_key')
      .on(t.appId, t.userId)
      .where(sql`${t.resolution} is null`),
    index('app_invitations_user_idx').on(t.userId),
    check(
      'app_invitations_role',
      sql.raw(`role in (${APP_ROLES.map((r) => `'${r}'`).join(', ')})`),
    ),
  ],
);

/**
 * The audit log of an app (src/audit/audit-service.ts): one row per sensitive change, who made it
 * (a user, the admin CLI or an API key), from where (client IP, user agent), its target and what
 * changed, never a secret. Ids are UUIDv7 (time-ordered): the log's pages are keyset pages on
 * (app_id, id).
 *
 * Partitioned by range of created_at, a week from Monday 00:00 UTC each (drizzle/0027,
 * src/audit/audit-partitions.ts), kept AUDIT_RETENTION_DAYS (at least a year): retention drops a
 * week's partition, never a DELETE of rows. So the primary key holds created_at (a partitioned
 * table's unique keys must hold its partition key); each partition has the app's index on
 * (app_id, id), which the keyset pages merge newest first.
 */
export const auditEvents = pgTable(
  'audit_events',
  {
    id: uuid('id').notNull(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    actorType: text('actor_type', { enum: ['user', 'admin_cli', 'api_key'] }).notNull(),
    /** The user's or the API key's id (null: the admin CLI). */
    actorId: uuid('actor_id'),
    /** The user's username at the time (null otherwise). */
    actorName: text('actor_name'),
    action: text('action').notNull(),
    target: text('target'),
    details: jsonb('details').$type<Record<string, unknown>>().notNull().default({}),
    ip: text('ip'),
    userAgent: text('user_agent'),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.id, t.createdAt] }),
    index('audit_events_app_idx').on(t.appId, t.id.desc()),
    check('audit_events_actor_type', sql`${t.actorType} in ('user', 'admin_cli', 'api_key')`),
  ],
);

export const appRedirectUris = pgTable(
  'app_redirect_uris',
  {
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    uri: text('uri').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.appId, t.uri] })],
);

/** Client secrets (svc_cs_): only a SHA-256 hash is stored; at most one active per app. */
export const appClientSecrets = pgTable(
  'app_client_secrets',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    secretHash: text('secret_hash').notNull(),
    prefix: text('prefix').notNull(),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('app_client_secrets_hash_key').on(t.secretHash),
    uniqueIndex('app_client_secrets_one_active')
      .on(t.appId)
      .where(sql`${t.revokedAt} is null`),
  ],
);

/** API keys: the environment is fixed by the key's prefix; only a SHA-256 hash is stored. */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    keyHash: text('key_hash').notNull(),
    prefix: text('prefix').notNull(),
    /** Set at creation, editable; a rolled key's replacement keeps it. */
    name: text('name').notNull().default(''),
    scopes: text('scopes').array().notNull(),
    createdAt: createdAt(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    /** A rolled key keeps working until then; afterwards it answers 401 like a revoked one. */
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    /**
     * Who made it (created or rolled it), for the Keys page's "Made by": the signed-in member
     * (null when their account is gone), and how (null: made before drizzle/0028 kept this).
     */
    createdBy: uuid('created_by').references(() => users.id, { onDelete: 'set null' }),
    createdVia: text('created_via', { enum: MADE_VIA }),
  },
  (t) => [
    uniqueIndex('api_keys_hash_key').on(t.keyHash),
    index('api_keys_app_idx').on(t.appId),
    check('api_keys_environment', sql`${t.environment} in ('sandbox', 'live')`),
    check('api_keys_created_via', sql`${t.createdVia} in ('portal', 'admin_cli')`),
  ],
);

/** A milestone is done once its row exists. */
export const appMilestones = pgTable(
  'app_milestones',
  {
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    completedAt: timestamp('completed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.appId, t.name] })],
);

export const listings = pgTable(
  'listings',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    sellerId: uuid('seller_id')
      .notNull()
      .references(() => users.id),
    /** The app whose credential created the listing (webhooks go to its endpoints). */
    appId: uuid('app_id').references(() => apps.id, { onDelete: 'set null' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    status: text('status', { enum: ['draft', 'active', 'archived'] }).notNull(),
    title: text('title').notNull(),
    description: text('description'),
    category: text('category'),
    condition: text('condition'),
    brand: text('brand'),
    size: text('size'),
    color: text('color'),
    priceCents: integer('price_cents').notNull(),
    currency: text('currency').notNull().default('usd'),
    impactMode: boolean('impact_mode').notNull().default(false),
    coverImageUrl: text('cover_image_url'),
    imageUrls: text('image_urls')
      .array()
      .notNull()
      .default(sql`'{}'::text[]`),
    tags: text('tags')
      .array()
      .notNull()
      .default(sql`'{}'::text[]`),
    likeCount: integer('like_count').notNull().default(0),
    externalId: text('external_id'),
    /** Microsecond precision, unique per environment: the feed's order and cursor key. */
    publishedAt: timestamp('published_at', {
      withTimezone: true,
      precision: 6,
      mode: 'string',
    }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
    /**
     * What `q` searches (OpenAPI "Search and sync"): listings_search_document (drizzle/0010)
     * weighs the title A, brand, category and tags B, the description C, English stemming.
     */
    search: tsvector('search')
      .notNull()
      .generatedAlwaysAs(sql`listings_search_document(title, description, brand, category, tags)`),
    /**
     * What a search's matches are gathered by (OpenAPI "Search and sync", drizzle/0013): the
     * words of `search` and one token per filterable value (scope, seller, status, category,
     * brand, size, color, condition, tags, impact mode), so that one GIN index intersects any
     * combination of a word and filters, driven by its rarest part.
     */
    match: tsvector('match')
      .notNull()
      .generatedAlwaysAs(
        sql`listings_match_document(title, description, brand, category, tags, size, color, condition, impact_mode, environment, status, seller_id)`,
      ),
  },
  (t) => [
    uniqueIndex('listings_environment_published_at_key').on(t.environment, t.publishedAt),
    // Partial: only listings that have an external_id are in it (most API creates have none), so
    // it stays small and cheap to write. It leads with external_id, unlike the four indexes that
    // lead with (seller_id, environment): the lookup by key (findByExternalIds) names external_id
    // alone as a plain equality, so only this index can serve it whatever the statistics say of
    // the seller (src/db/unique-lookups.ts, test/db/unique-lookups.test.ts).
    uniqueIndex('listings_seller_environment_external_id_key')
      .on(t.externalId, t.sellerId, t.environment)
      .where(sql`${t.externalId} is not null`),
    // The public feed: live, active, newest first.
    index('listings_public_feed_idx')
      .on(t.publishedAt.desc())
      .where(sql`${t.environment} = 'live' and ${t.status} = 'active'`),
    // A seller's own feed per environment (sandbox inventory, live "any status").
    index('listings_seller_feed_idx').on(t.sellerId, t.environment, t.publishedAt.desc()),
    // Search and sync (OpenAPI "Search and sync"; the rows each page reads:
    // test/listings/search-plans.test.ts). A search's matches: one GIN index over the words and
    // filter tokens of every listing (`match`). Without GIN's pending list (fastupdate): each
    // write pays for its own entries, instead of the write that finds the list full (4 MB)
    // paying for everyone's, a stall of its own under sustained writes; and searches never
    // scan the list.
    index('listings_match_idx').using('gin', t.match).with({ fastupdate: false }),
    // The public feed by price (either direction) and by change, for sync.
    index('listings_public_price_idx')
      .on(t.priceCents, t.publishedAt)
      .where(sql`${t.environment} = 'live' and ${t.status} = 'active'`),
    index('listings_public_updated_idx')
      .on(t.updatedAt, t.id)
      .where(sql`${t.environment} = 'live' and ${t.status} = 'active'`),
    // A seller's own listings of one status, newest first (the owner view's `status`): without
    // it a page of drafts reads the seller's whole inventory in that environment.
    index('listings_seller_status_feed_idx').on(
      t.sellerId,
      t.environment,
      t.status,
      t.publishedAt.desc(),
    ),
    // A seller's own changes per environment, every status: an inventory tool's sync.
    index('listings_seller_updated_idx').on(t.sellerId, t.environment, t.updatedAt, t.id),
    // A seller's listings per environment by price (a seller's page sorted by price, walked).
    index('listings_seller_price_idx').on(t.sellerId, t.environment, t.priceCents, t.publishedAt),
    check('listings_environment', sql`${t.environment} in ('sandbox', 'live')`),
    check('listings_status', sql`${t.status} in ('draft', 'active', 'archived')`),
    check('listings_price_positive', sql`${t.priceCents} > 0`),
  ],
);

/* ---------------------------------------------------------------- sign-in sessions */

/**
 * Browser sessions of signed-in users (OAuth pages, portal). Only the token's SHA-256 is stored.
 */
export const userSessions = pgTable(
  'user_sessions',
  {
    tokenHash: text('token_hash').primaryKey(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('user_sessions_user_idx').on(t.userId)],
);

/**
 * Sign-ins to a user's account, kept for their account page's history (UsersService.signIns):
 * when, from which client IP and user agent, and how it ended: `succeeded`, `failed` (a wrong
 * password) or `throttled` (refused by the sign-in limits before the password was checked).
 */
export const signIns = pgTable(
  'sign_ins',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    outcome: text('outcome', { enum: ['succeeded', 'failed', 'throttled'] }).notNull(),
    ip: text('ip'),
    userAgent: text('user_agent'),
    createdAt: createdAt(),
  },
  (t) => [
    index('sign_ins_user_idx').on(t.userId, t.id.desc()),
    check('sign_ins_outcome', sql`${t.outcome} in ('succeeded', 'failed', 'throttled')`),
  ],
);

/* ---------------------------------------------------------------- OAuth 2.0 */

/**
 * A grant: one user's authorization of one app for some scopes. Codes and tokens hang off it,
 * so revoking a grant (the user signs the app out, or a code is replayed) revokes everything
 * issued under it, and refresh tokens can later be added as another token kind.
 */
export const oauthGrants = pgTable(
  'oauth_grants',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    scopes: text('scopes').array().notNull(),
    createdAt: createdAt(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('oauth_grants_user_idx').on(t.userId), index('oauth_grants_app_idx').on(t.appId)],
);

/**
 * Authorization codes (svc_ac_): one use, ~10 minutes, bound to client, redirect_uri and PKCE
 * challenge.
 */
export const oauthCodes = pgTable('oauth_codes', {
  codeHash: text('code_hash').primaryKey(),
  grantId: uuid('grant_id')
    .notNull()
    .references(() => oauthGrants.id, { onDelete: 'cascade' }),
  redirectUri: text('redirect_uri').notNull(),
  scopes: text('scopes').array().notNull(),
  codeChallenge: text('code_challenge'),
  codeChallengeMethod: text('code_challenge_method'),
  createdAt: createdAt(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  consumedAt: timestamp('consumed_at', { withTimezone: true }),
});

/**
 * Tokens issued under a grant: access tokens (svc_oauth_) and refresh tokens (svc_rt_). A refresh
 * token is used once: rotating it sets rotated_at (and revoked_at); presenting it again is reuse,
 * which revokes the grant (RFC 9700 §4.14.2).
 */
export const oauthTokens = pgTable(
  'oauth_tokens',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    grantId: uuid('grant_id')
      .notNull()
      .references(() => oauthGrants.id, { onDelete: 'cascade' }),
    kind: text('kind', { enum: ['access', 'refresh'] })
      .notNull()
      .default('access'),
    tokenHash: text('token_hash').notNull(),
    scopes: text('scopes').array().notNull(),
    /** The code it was exchanged for: a replay of that code revokes it. */
    codeHash: text('code_hash'),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    /** A refresh token that was exchanged for a new one. */
    rotatedAt: timestamp('rotated_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('oauth_tokens_hash_key').on(t.tokenHash),
    index('oauth_tokens_grant_idx').on(t.grantId),
  ],
);

/* ---------------------------------------------------------------- saved searches */

/**
 * Saved searches (OpenAPI "Saved searches", src/saved-searches/): a search of GET /listings an
 * app keeps, per app and environment; `user_id` is the user it acts as (a key's developer, a
 * token's user: the sandbox feed it matches, and who its events are about), `via_token` whether
 * it was made through that user's OAuth token (then only their tokens see it, and it matches
 * only while they grant the app access). The filter columns are GET /listings' parameters; a
 * null one does not filter.
 */
export const savedSearches = pgTable(
  'saved_searches',
  {
    id: uuid('id').primaryKey(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    viaToken: boolean('via_token').notNull(),
    name: text('name').notNull(),
    q: text('q'),
    category: text('category'),
    condition: text('condition').array(),
    tag: text('tag').array(),
    brand: text('brand'),
    size: text('size'),
    color: text('color'),
    minPriceCents: integer('min_price_cents'),
    maxPriceCents: integer('max_price_cents'),
    impactMode: boolean('impact_mode'),
    sellerUsername: text('seller_username'),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
    lastMatchedAt: timestamp('last_matched_at', {
      withTimezone: true,
      precision: 6,
      mode: 'string',
    }),
  },
  (t) => [
    index('saved_searches_app_env_idx').on(t.appId, t.environment, t.id),
    check('saved_searches_environment', sql`${t.environment} in ('sandbox', 'live')`),
  ],
);

/**
 * What a listing write finds its candidate saved searches by: each saved search's key tokens
 * (tokens of listings.match, drizzle/0013), at least one of which every listing it matches
 * has, with the search's price range (its bounds, or the widest). A write looks up the tokens
 * of its listing at its price here (saved_search_keys_price_idx), never the saved searches
 * themselves: a thousand searches of one brand in narrow price ranges are a few candidates.
 */
export const savedSearchKeys = pgTable(
  'saved_search_keys',
  {
    token: text('token').notNull(),
    savedSearchId: uuid('saved_search_id')
      .notNull()
      .references(() => savedSearches.id, { onDelete: 'cascade' }),
    /** The saved search's min_price_cents, or 0. */
    minPriceCents: integer('min_price_cents').notNull().default(0),
    /** The saved search's max_price_cents, or the largest integer. */
    maxPriceCents: integer('max_price_cents').notNull().default(2147483647),
  },
  (t) => [
    primaryKey({ columns: [t.token, t.savedSearchId] }),
    index('saved_search_keys_search_idx').on(t.savedSearchId),
    // Every column: the lookup and its price test read the index alone.
    index('saved_search_keys_price_idx').on(
      t.token,
      t.maxPriceCents,
      t.minPriceCents,
      t.savedSearchId,
    ),
  ],
);

/** The listings a saved search matches now: one listing.matched each, until it stops matching. */
export const savedSearchMatches = pgTable(
  'saved_search_matches',
  {
    savedSearchId: uuid('saved_search_id')
      .notNull()
      .references(() => savedSearches.id, { onDelete: 'cascade' }),
    listingId: uuid('listing_id').notNull(),
    matchedAt: timestamp('matched_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.savedSearchId, t.listingId] }),
    index('saved_search_matches_listing_idx').on(t.listingId),
  ],
);

/**
 * Listings written since the matcher last looked: a row per write, in the write's own
 * transaction (or statement), deleted by the matcher in the transaction that records its
 * matches, so a crash between the two loses nothing (src/saved-searches/matcher-worker.ts).
 */
export const listingMatchQueue = pgTable(
  'listing_match_queue',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    listingId: uuid('listing_id').notNull(),
    /**
     * Its candidate saved searches, once a pass has counted them (null before). Over 200 (the
     * matcher's HEAVY) it waits in the heavy lane, matched one a pass, so that a listing which
     * many saved searches match delays no other listing's matching.
     */
    weight: integer('weight'),
  },
  (t) => [
    index('listing_match_queue_light_idx')
      .on(t.id)
      .where(sql`coalesce(${t.weight}, 0) <= 200`),
    index('listing_match_queue_heavy_idx')
      .on(t.id)
      .where(sql`${t.weight} > 200`),
  ],
);

/**
 * listing.matched events recorded for one developer account in its current minute (the
 * matcher's per-owner budget, OpenAPI "Saved searches", "Budgets"): a window starts with the
 * first match after the last one ended.
 */
export const savedSearchMatchBudgets = pgTable('saved_search_match_budgets', {
  ownerId: uuid('owner_id')
    .primaryKey()
    .references(() => users.id, { onDelete: 'cascade' }),
  windowStart: timestamp('window_start', { withTimezone: true }).notNull(),
  used: integer('used').notNull(),
});

export type AppRow = typeof apps.$inferSelect;
export type AppMemberRow = typeof appMembers.$inferSelect;
export type AppInvitationRow = typeof appInvitations.$inferSelect;
export type AuditEventRow = typeof auditEvents.$inferSelect;
export type SignInRow = typeof signIns.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type MilestoneRow = typeof appMilestones.$inferSelect;
export type UserRow = typeof users.$inferSelect;
export type GrantRow = typeof oauthGrants.$inferSelect;
export type CodeRow = typeof oauthCodes.$inferSelect;
export type TokenRow = typeof oauthTokens.$inferSelect;
export type SavedSearchRow = typeof savedSearches.$inferSelect;
