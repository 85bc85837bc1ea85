-- The audit log partitioned by range of created_at, a week from Monday 00:00 UTC each (issue #61;
-- docs/operations.md, "The audit log's retention"; src/audit/audit-partitions.ts names them,
-- src/db/partitions.ts makes and drops them), kept AUDIT_RETENTION_DAYS (400 by default, at least
-- 366). As drizzle/0015 and 0016 do for the request log and the outbox, no row moves: the table
-- as it was becomes the partition of everything before the next Monday 00:00 UTC (from MINVALUE)
-- and is dropped whole once its newest possible row is past retention. A partitioned table's
-- unique keys must hold its partition key: the primary key on id becomes one on (id, created_at),
-- built on the old rows by the attach (one scan of them, under ACCESS EXCLUSIVE). The app's index
-- on (app_id, id) and the foreign key to apps attach to the parent's.
ALTER TABLE "audit_events" RENAME TO "audit_events_before_partitions";--> statement-breakpoint
ALTER TABLE "audit_events_before_partitions" DROP CONSTRAINT "audit_events_pkey";--> statement-breakpoint
ALTER INDEX "audit_events_app_idx" RENAME TO "audit_events_before_partitions_app_idx";--> statement-breakpoint
CREATE TABLE "audit_events" (
	"id" uuid NOT NULL,
	"app_id" uuid NOT NULL,
	"actor_type" text NOT NULL,
	"actor_id" uuid,
	"actor_name" text,
	"action" text NOT NULL,
	"target" text,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"ip" text,
	"user_agent" text,
	"created_at" timestamp(6) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "audit_events_id_created_at_pk" PRIMARY KEY("id","created_at"),
	CONSTRAINT "audit_events_actor_type" CHECK ("audit_events"."actor_type" in ('user', 'admin_cli', 'api_key'))
) PARTITION BY RANGE ("created_at");--> statement-breakpoint
ALTER TABLE "audit_events" ADD CONSTRAINT "audit_events_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "audit_events_app_idx" ON "audit_events" USING btree ("app_id","id" DESC NULLS LAST);--> statement-breakpoint
DO $$
BEGIN
  EXECUTE format(
    'ALTER TABLE "audit_events" ATTACH PARTITION "audit_events_before_partitions" FOR VALUES FROM (MINVALUE) TO (%L)',
    to_char(date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END
$$;
