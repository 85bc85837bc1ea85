/**
 * The audit log partitioned by time (drizzle/0027; src/db/partitions.ts keeps it with the request
 * log and the outbox; docs/operations.md, "The audit log's retention"): a week from Monday
 * 00:00 UTC each, two weeks made ahead, a week dropped once its newest entry is
 * AUDIT_RETENTION_DAYS old (400 by default, at least 366: the "at least a year").
 * Retention drops a week's partition, never a DELETE of rows. The parent's primary key
 * (id, created_at) and index on (app_id, id) are each partition's: nothing of their own.
 */
import type { PartitionedTable } from '../db/partitions.ts';

const DAY_MS = 86_400_000;

/** AUDIT_RETENTION_DAYS' default (src/config.ts). */
const DEFAULT_AUDIT_RETENTION_DAYS = 400;

export function auditPartitions(retentionDays = DEFAULT_AUDIT_RETENTION_DAYS): PartitionedTable {
  return {
    table: 'audit_events',
    span: 'week',
    ahead: 2,
    retentionMs: retentionDays * DAY_MS,
    ownIndexes: () => [],
  };
}
