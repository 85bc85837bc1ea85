/**
 * The request log's tables, defined once for the two places they can live: on the primary
 * (primary-request-log-schema.ts builds its tables from these columns, adding the foreign keys
 * to apps) and on a database of their own (REQUEST_LOG_DATABASE_URL, docs/operations.md "Request
 * log database"), whose schema is the tables below: drizzle.request-log.config.ts reads this file,
 * its migrations are in drizzle/request-log/ (applied at start by src/db/migrations.ts). Apps live
 * on the primary, so no foreign key here: a deleted app's rows are reached by nothing (every read
 * is per app) and go with their day's partition.
 */
import { index, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';

/** request_logs' columns but the foreign key (primary-request-log-schema.ts adds it). */
export const requestLogColumns = () => ({
  id: uuid('id').notNull().defaultRandom(),
  appId: uuid('app_id').notNull(),
  environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, precision: 6, mode: 'string' })
    .notNull()
    .defaultNow(),
  method: text('method').notNull(),
  path: text('path').notNull(),
  status: integer('status').notNull(),
  errorCode: text('error_code'),
  errorMessage: text('error_message'),
  /** The error's `details` as JSON text. */
  errorDetails: text('error_details'),
  latencyMs: integer('latency_ms').notNull(),
  requestId: text('request_id').notNull(),
  /** The API key used (its prefix and name are read from it), or the user a token acts for. */
  keyId: uuid('key_id'),
  userId: uuid('user_id'),
  /** The rate-limit state answered (limit, remaining, reset) as JSON text. */
  rateLimit: text('rate_limit'),
  /**
   * The request's and the response's JSON bodies as sent, their first 8 KB
   * (src/request-logs/logged-body.ts), redacted (src/lib/redact.ts `redactJson`); null when
   * there was none or it was not JSON. The sizes are the whole bodies' bytes: a body is cut when
   * its size is larger than the cap.
   */
  requestBody: text('request_body'),
  requestBodySize: integer('request_body_size'),
  responseBody: text('response_body'),
  responseBodySize: integer('response_body_size'),
});

/** request_log_drops' columns but the foreign key. */
export const requestLogDropColumns = () => ({
  appId: uuid('app_id').notNull(),
  environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
  dropped: integer('dropped').notNull().default(0),
  lastDroppedAt: timestamp('last_dropped_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The log, partitioned by range of created_at a UTC day each, exactly as on the primary
 * (drizzle/request-log/0000 says it by hand: drizzle-kit cannot), each partition with its own
 * index on id (REQUEST_LOG_PARTITIONS).
 */
export const requestLogs = pgTable('request_logs', requestLogColumns(), (t) => [
  index('request_logs_app_feed_idx').on(t.appId, t.environment, t.createdAt.desc()),
]);

export const requestLogDrops = pgTable('request_log_drops', requestLogDropColumns(), (t) => [
  primaryKey({ columns: [t.appId, t.environment] }),
]);

/**
 * Who maintains the partitions now (src/db/partitions.ts): one row per job, claimed by one
 * instance until expires_at. A row, not an advisory lock, so that it holds through a
 * transaction-mode pooler and ends by itself when its holder dies. The same table on the primary
 * (primary-request-log-schema.ts exports this one) and on the log's database, each for its own
 * partitions.
 */
export const maintenanceLeases = pgTable('maintenance_leases', {
  name: text('name').primaryKey(),
  holder: text('holder').notNull(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
});
