/**
 * The request log's tables on the primary (docs/portal.md, request logs and usage): the columns
 * of request-log-schema.ts with the foreign keys to apps, which a database of the log's own
 * (REQUEST_LOG_DATABASE_URL) cannot have. Part of the one Drizzle schema of the primary, with
 * schema.ts and outbox-schema.ts: drizzle.config.ts and the database client (database.ts) read
 * the three files.
 */
import { index, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { requestLogColumns, requestLogDropColumns } from './request-log-schema.ts';
import { apps } from './schema.ts';

/**
 * One /api/v1 request made with an app's credentials (docs/portal.md, request logs): its JSON
 * bodies' first 8 KB redacted, no headers, no credentials, no query values that could be secret.
 * Written in batches off the request's path; kept 14 days.
 *
 * Partitioned by range of created_at, a partition a UTC day (drizzle/0015, src/db/partitions.ts):
 * retention drops a day's partition instead of deleting its rows. So no primary key (a unique key
 * of a partitioned table must hold created_at); each partition has its own index on id, and an
 * id is a UUIDv7 of the request's time (src/lib/uuid-v7.ts), so a lookup by id is bounded to the
 * partition of its time.
 */
export const requestLogs = pgTable(
  'request_logs',
  {
    ...requestLogColumns(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
  },
  (t) => [index('request_logs_app_feed_idx').on(t.appId, t.environment, t.createdAt.desc())],
);

/** Requests not logged because the buffer was full, counted per app and environment. */
export const requestLogDrops = pgTable(
  'request_log_drops',
  {
    ...requestLogDropColumns(),
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
  },
  (t) => [primaryKey({ columns: [t.appId, t.environment] })],
);

/**
 * The request log's rollup (docs/portal.md, usage): per app, environment, UTC hour and outcome
 * (2xx, 3xx, 4xx other than 429, 429, 5xx), the requests and their latencies counted in the fixed
 * buckets of src/request-logs/usage.ts, but the long polls (`wait`): counted apart, out of the
 * buckets. Written with each batch of the log, pruned with it.
 */
export const requestUsage = pgTable(
  'request_usage',
  {
    appId: uuid('app_id')
      .notNull()
      .references(() => apps.id, { onDelete: 'cascade' }),
    environment: text('environment', { enum: ['sandbox', 'live'] }).notNull(),
    hour: timestamp('hour', { withTimezone: true, mode: 'string' }).notNull(),
    outcome: text('outcome', { enum: ['2xx', '3xx', '4xx', '429', '5xx'] }).notNull(),
    /** Every request, long polls included. */
    requests: integer('requests').notNull(),
    /** Of `requests`, the long polls (usage.ts, isLongPoll): not in latency_buckets. */
    longPolls: integer('long_polls').notNull().default(0),
    /**
     * The other requests per latency bucket, in the order of LATENCY_BOUNDS_MS (the last: above
     * them).
     */
    latencyBuckets: integer('latency_buckets').array().notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.appId, t.environment, t.hour, t.outcome] }),
    // The retention's delete.
    index('request_usage_hour_idx').on(t.hour),
  ],
);

/** Who maintains the partitions now (src/db/partitions.ts): the same table on either database. */
export { maintenanceLeases } from './request-log-schema.ts';
