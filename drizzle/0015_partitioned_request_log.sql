-- The request log partitioned by range of created_at, a UTC day each (issue #45; docs/scaling.md,
-- partitions; src/db/partitions.ts makes and drops them). No row moves: the table as it was
-- becomes the first partition, from MINVALUE to the next UTC midnight, and is dropped whole once
-- its newest possible row is 14 days old. The rename and the attach hold ACCESS EXCLUSIVE on
-- the old table for one scan of it (the attach proves its rows fit the bound): docs/operations.md
-- gives the time it took at a million rows. Its indexes are reused: the app's feed index attaches
-- to the parent's, its primary key stays its index on id; the created_at index, which only the
-- DELETE of the retention used, goes.
ALTER TABLE "request_logs" RENAME TO "request_logs_before_partitions";--> statement-breakpoint
ALTER INDEX "request_logs_pkey" RENAME TO "request_logs_before_partitions_id_idx";--> statement-breakpoint
ALTER INDEX "request_logs_app_feed_idx" RENAME TO "request_logs_before_partitions_app_feed_idx";--> statement-breakpoint
DROP INDEX "request_logs_created_at_idx";--> statement-breakpoint
CREATE TABLE "request_logs" (
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"created_at" timestamp(6) with time zone DEFAULT now() NOT NULL,
	"method" text NOT NULL,
	"path" text NOT NULL,
	"status" integer NOT NULL,
	"error_code" text,
	"error_message" text,
	"error_details" text,
	"latency_ms" integer NOT NULL,
	"request_id" text NOT NULL,
	"key_id" uuid,
	"user_id" uuid,
	"rate_limit" text
) PARTITION BY RANGE ("created_at");--> statement-breakpoint
ALTER TABLE "request_logs" ADD CONSTRAINT "request_logs_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_logs_app_feed_idx" ON "request_logs" USING btree ("app_id","environment","created_at" DESC NULLS LAST);--> statement-breakpoint
DO $$
BEGIN
  EXECUTE format(
    'ALTER TABLE "request_logs" ATTACH PARTITION "request_logs_before_partitions" FOR VALUES FROM (MINVALUE) TO (%L)',
    to_char(date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
END
$$;--> statement-breakpoint
CREATE TABLE "maintenance_leases" (
	"name" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
