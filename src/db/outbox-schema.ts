/**
 * The webhook outbox's tables (endpoints, events, deliveries, attempts): what happens to the
 * API's data, recorded beside the data itself (src/db/schema.ts). Part of the one Drizzle schema
 * of the primary, with schema.ts and primary-request-log-schema.ts: drizzle.config.ts and the
 * database client (database.ts) read the three files.
 */
import { sql } from 'drizzle-orm';
import {
  boolean,
  check,
  index,
  integer,
  pgSequence,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { MADE_VIA } from '../lib/made-by.ts';
import { apps, users } from './schema.ts';

/** The values behind events' created_at (src/db/ordering-key.ts), as listings' published_at. */
export const webhookEventsCreatedSeq = pgSequence('webhook_events_created_seq');

const createdAt = () =>
  timestamp('created_at', { withTimezone: true, precision: 6 }).notNull().defaultNow();

/**
 * Webhook endpoints per app and environment. The signing secret is kept as issued (`svc_whsec_`
 * + base64, or + base64url before that form, until rotated): the server must sign with it (an
 * HMAC key cannot be a one-way hash); it is never shown again.
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    url: text('url').notNull(),
    secret: text('secret').notNull(),
    /** After a rotation the old secret also signs deliveries until previous_secret_expires_at. */
    previousSecret: text('previous_secret'),
    previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true }),
    active: boolean('active').notNull().default(true),
    /** Why an inactive endpoint was disabled (410 Gone, failing for 3 days, an operator). */
    disabledReason: text('disabled_reason'),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
    lastError: text('last_error'),
    lastFailureAt: timestamp('last_failure_at', { withTimezone: true }),
    /** The first failed attempt since the last success: 3 days of only failures disable it. */
    failingSince: timestamp('failing_since', { withTimezone: true }),
    /**
     * The event types it receives (`listing.created`, …), or `{*}`: every type, today's and
     * tomorrow's. Pings reach it whatever this says (docs/webhooks.md, "Choosing events").
     */
    enabledEvents: text('enabled_events')
      .array()
      .notNull()
      .default(sql`'{*}'::text[]`),
    /**
     * Deleted (DELETE /api/v1/webhook_endpoints/{id}): kept, inactive and without its secrets,
     * because its deliveries name it; no door shows or changes it again.
     */
    deletedAt: timestamp('deleted_at', { withTimezone: true }),
    createdAt: createdAt(),
    /**
     * Who made it, for the Webhooks page's "Made by": the signed-in member on the portal (null
     * when their account is gone, and for the admin CLI and an API key, which act for nobody in
     * particular: the audit log's entry names the key), and how (null: before drizzle/0027).
     */
    createdBy: uuid('created_by').references(() => users.id, { onDelete: 'set null' }),
    createdVia: text('created_via', { enum: MADE_VIA }),
  },
  (t) => [
    index('webhook_endpoints_app_env_idx').on(t.appId, t.environment),
    check(
      'webhook_endpoints_created_via',
      sql`${t.createdVia} in ('portal', 'admin_cli', 'api_key')`,
    ),
  ],
);

/**
 * Events (the outbox), recorded in the transaction of the listing change.
 *
 * The outbox is partitioned by range of time, a week from Monday 00:00 UTC each (drizzle/0016,
 * src/events/outbox-partitions.ts): events by created_at, deliveries by their event's
 * created_at (so a delivery lives in its event's week and goes with it), attempts by
 * attempted_at. Retention drops a week's partitions, never a DELETE of rows. So no primary key
 * on id (a partitioned table's unique keys must hold its partition key) and no foreign keys among
 * the three (a partitioned table cannot be referenced without its partition key): each partition
 * has its own unique index on id, and an id's first 12 hex characters are the milliseconds of the
 * event's created_at, so a lookup by id reads the partition of its time.
 */
export const webhookEvents = pgTable(
  'webhook_events',
  {
    /** 32 hex: a UUIDv7 of created_at without its dashes (random before drizzle/0016). */
    id: text('id').notNull(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    type: text('type').notNull(),
    /** The event's `data` object as JSON text ({ listing } or { message }). */
    data: text('data').notNull(),
    /** The listing a listing event is about, and its seller (null for pings). */
    listingId: uuid('listing_id'),
    /** An OAuth token, acting for one user, lists only the events whose seller is that user. */
    sellerId: uuid('seller_id'),
    /** The W3C trace id of the request that recorded it, for the delivery attempts' logs. */
    traceId: text('trace_id'),
    createdAt: timestamp('created_at', {
      withTimezone: true,
      precision: 6,
      mode: 'string',
    }).notNull(),
  },
  (t) => [
    uniqueIndex('webhook_events_environment_created_at_key').on(t.environment, t.createdAt),
    index('webhook_events_app_feed_idx').on(t.appId, t.environment, t.createdAt.desc()),
    // GET /api/v1/events for an OAuth token: one user's events of the app, still one ordered scan.
    index('webhook_events_seller_feed_idx')
      .on(t.appId, t.sellerId, t.environment, t.createdAt.desc())
      .where(sql`${t.sellerId} is not null`),
  ],
);

/**
 * One delivery of an event to an endpoint, retried on the schedule until it succeeds or fails
 * for good. Its id (32 hex) is the body's `id` and X-Service-Delivery, the same on every attempt:
 * like its event's, a UUIDv7 of the event's created_at, so a lookup by delivery id reads the one
 * partition of event_created_at.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').notNull(),
    eventId: text('event_id').notNull(),
    /** The event's created_at, copied when the delivery is made: the partition key. */
    eventCreatedAt: timestamp('event_created_at', {
      withTimezone: true,
      precision: 6,
      mode: 'string',
    }).notNull(),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    status: text('status', { enum: ['pending', 'succeeded', 'failed'] })
      .notNull()
      .default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true }),
    lastResponseCode: integer('last_response_code'),
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event_endpoint_key').on(
      t.eventId,
      t.endpointId,
      t.eventCreatedAt,
    ),
    index('webhook_deliveries_due_idx')
      .on(t.nextAttemptAt)
      .where(sql`${t.status} = 'pending'`),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt.desc()),
    // The fair claim: each endpoint's oldest due attempts.
    index('webhook_deliveries_endpoint_due_idx')
      .on(t.endpointId, t.nextAttemptAt)
      .where(sql`${t.status} = 'pending'`),
  ],
);

/** Every attempt of a delivery, for the portal's Events page (status, duration, error). */
export const webhookDeliveryAttempts = pgTable(
  'webhook_delivery_attempts',
  {
    /** No foreign key (partitioned): an attempt may outlive its delivery by a week. */
    deliveryId: text('delivery_id').notNull(),
    /** Its number in the delivery's schedule (1 for the first; a redelivery starts again at 1). */
    attempt: integer('attempt').notNull(),
    attemptedAt: timestamp('attempted_at', { withTimezone: true, precision: 6, mode: 'string' })
      .notNull()
      .defaultNow(),
    responseCode: integer('response_code'),
    error: text('error'),
    durationMs: integer('duration_ms').notNull(),
  },
  (t) => [primaryKey({ columns: [t.deliveryId, t.attemptedAt] })],
);

/** Rows as the repositories read them (Drizzle's inferred select types). */
export type EndpointRow = typeof webhookEndpoints.$inferSelect;
export type DeliveryAttemptRow = typeof webhookDeliveryAttempts.$inferSelect;
