/**
 * The webhook outbox partitioned by time (drizzle/0016; src/db/partitions.ts keeps them;
 * docs/scaling.md, partitions): a week from Monday 00:00 UTC each, two weeks made ahead. Events
 * by created_at and kept 30 days; deliveries by their event's created_at (event_created_at), so
 * they are dropped with their events' week; attempts by attempted_at, kept a week longer (a
 * redelivery can be attempted days after its event). Retention drops a week's partitions, never
 * a DELETE of rows.
 *
 * Ids of events and deliveries are 32 hex characters, a UUIDv7 without its dashes whose first 12
 * characters are the milliseconds of the event's created_at (a delivery's: of its event's), made
 * in SQL from the created_at the statement gives the event: a lookup by id bounds the partition
 * key to that millisecond and reads one partition. Ids from before drizzle/0016 were random: one
 * that does not look like a UUIDv7, or is not found in its millisecond (a random id can look like
 * one), is looked up in every partition, each partition's index on id once.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { PartitionedTable } from '../db/partitions.ts';

const DAY_MS = 86_400_000;

/** How long events (and their deliveries) are kept and listed (GET /api/v1/events). */
const EVENT_RETENTION_DAYS = 30;
export const EVENT_RETENTION = sql.raw(`interval '${EVENT_RETENTION_DAYS} days'`);

/** Each partition's own unique index on id (a partitioned parent cannot hold one). */
const idIndex = (partition: string) => [
  `create unique index if not exists "${partition}_id_idx" on "${partition}" (id)`,
];

export const OUTBOX_PARTITIONS: PartitionedTable[] = [
  {
    table: 'webhook_events',
    span: 'week',
    ahead: 2,
    retentionMs: EVENT_RETENTION_DAYS * DAY_MS,
    ownIndexes: idIndex,
  },
  {
    table: 'webhook_deliveries',
    span: 'week',
    ahead: 2,
    retentionMs: EVENT_RETENTION_DAYS * DAY_MS,
    ownIndexes: idIndex,
  },
  {
    table: 'webhook_delivery_attempts',
    span: 'week',
    ahead: 2,
    retentionMs: (EVENT_RETENTION_DAYS + 7) * DAY_MS,
    ownIndexes: () => [],
  },
];

/**
 * A new id of the event created at `at` (a timestamptz expression): its milliseconds in 12 hex
 * characters, the version 7, then 19 random hex characters of `random` (32 hex characters, as
 * gen_random_uuid() without dashes) from the 14th on, which keep a UUID's variant.
 */
export function timeOrderedId(
  at: SQL,
  random: SQL = sql`replace(gen_random_uuid()::text, '-', '')`,
): SQL {
  return sql`(lpad(to_hex(floor(extract(epoch from ${at}) * 1000)::bigint), 12, '0') || '7' || substr(${random}, 14))`;
}

/** The millisecond an id of timeOrderedId was made at; undefined if it cannot be one. */
export function idTime(id: string): number | undefined {
  if (!/^[0-9a-f]{12}7[0-9a-f]{19}$/.test(id)) return undefined;
  return Number.parseInt(id.slice(0, 12), 16);
}
